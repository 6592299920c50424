package hive_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive"
	"github.com/steadystate/steadystate/hive/cell"
)

// serverConfig is a value config: Flags declares, fields are matched by name.
type serverConfig struct {
	Port     int
	Name     string
	Interval time.Duration
	Tags     []string
	Labels   map[string]string
	Addr     netip.Addr
	Debug    bool
	Ratio    float64
	Renamed  uint16 `flag:"legacy-port"`
}

var serverDefaults = serverConfig{Port: 80, Name: "web", Interval: time.Second, Tags: []string{"a"}, Ratio: 0.5, Renamed: 1}

func (def serverConfig) Flags(fs *pflag.FlagSet) {
	fs.Int("port", def.Port, "port to listen on")
	fs.String("name", def.Name, "server name")
	fs.Duration("interval", def.Interval, "poll interval")
	fs.StringSlice("tags", def.Tags, "tags")
	fs.StringToString("labels", def.Labels, "labels")
	fs.String("addr", "", "an IP address")
	fs.Bool("debug", def.Debug, "debug mode")
	fs.Float64("ratio", def.Ratio, "a ratio")
	fs.Uint16("legacy-port", def.Renamed, "tagged field")
}

func (c serverConfig) Validate() error {
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("--port %d is out of range 1-65535", c.Port)
	}
	return nil
}

// loadServerConfig runs a hive with the server config, parsing args and
// reading env variables under prefix TEST.
func loadServerConfig(t *testing.T, args []string, env map[string]string) (serverConfig, error) {
	t.Helper()
	return loadServerConfigWithPrefix(t, "TEST", args, env)
}

func loadServerConfigWithPrefix(t *testing.T, prefix string, args []string, env map[string]string) (serverConfig, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var got serverConfig
	h := hive.NewWithOptions(hive.Options{Logger: quiet.Logger, EnvPrefix: prefix}, cell.Module("server", "Server",
		cell.Config(serverDefaults),
		cell.Invoke(func(c serverConfig) { got = c }),
	))
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	h.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return got, err
	}
	return got, h.Populate()
}

func TestConfigValues(t *testing.T) {
	withDefaults := func(f func(*serverConfig)) serverConfig {
		c := serverDefaults
		f(&c)
		return c
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want serverConfig
	}{
		{name: "defaults", want: serverDefaults},
		{
			name: "flags",
			args: []string{"--port=8080", "--name=api", "--interval=1m", "--tags=x,y", "--labels=k=v,a=b",
				"--addr=10.0.0.1", "--debug", "--ratio=0.25", "--legacy-port=9"},
			want: withDefaults(func(c *serverConfig) {
				c.Port, c.Name, c.Interval, c.Tags = 8080, "api", time.Minute, []string{"x", "y"}
				c.Labels = map[string]string{"k": "v", "a": "b"}
				c.Addr, c.Debug, c.Ratio, c.Renamed = netip.MustParseAddr("10.0.0.1"), true, 0.25, 9
			}),
		},
		{
			name: "environment",
			env:  map[string]string{"TEST_PORT": "9090", "TEST_TAGS": "p,q", "TEST_LEGACY_PORT": "7"},
			want: withDefaults(func(c *serverConfig) { c.Port, c.Tags, c.Renamed = 9090, []string{"p", "q"}, 7 }),
		},
		{
			name: "flag wins over environment",
			args: []string{"--port=1234"},
			env:  map[string]string{"TEST_PORT": "9090", "TEST_NAME": "from-env"},
			want: withDefaults(func(c *serverConfig) { c.Port, c.Name = 1234, "from-env" }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadServerConfig(t, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if !equalServerConfig(got, tt.want) {
				t.Fatalf("config = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Without an env prefix (the default) no environment variable is read.
func TestNoEnvPrefixReadsNoEnvironment(t *testing.T) {
	env := map[string]string{"TEST_PORT": "9090", "PORT": "9091", "_PORT": "9092"}
	got, err := loadServerConfigWithPrefix(t, "", nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if !equalServerConfig(got, serverDefaults) {
		t.Fatalf("config = %+v, want the defaults", got)
	}
}

func equalServerConfig(a, b serverConfig) bool {
	return reflect.DeepEqual(a, b)
}

func TestConfigBadValues(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr error    // nil: any error (pflag's own parse errors)
		wantMsg []string // substrings
	}{
		{name: "bad flag", args: []string{"--port=abc"}, wantMsg: []string{"--port"}},
		{name: "bad env", env: map[string]string{"TEST_PORT": "abc"}, wantErr: cell.ErrInvalidFlagValue, wantMsg: []string{"--port", "TEST_PORT"}},
		{name: "bad field value", args: []string{"--addr=not-an-ip"}, wantErr: cell.ErrInvalidFlagValue, wantMsg: []string{"--addr", "not-an-ip"}},
		{name: "fails Validate", args: []string{"--port=70000"}, wantErr: cell.ErrInvalidConfig, wantMsg: []string{"--port", "module server"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadServerConfig(t, tt.args, tt.env)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error %q is not %v", err, tt.wantErr)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// boundConfig is a pointer config: Flags binds the fields itself.
type boundConfig struct {
	Workers int
	Mode    string
	Hosts   []string
}

func (c *boundConfig) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&c.Workers, "workers", c.Workers, "workers")
	fs.StringVar(&c.Mode, "run-mode", c.Mode, "mode (the name need not match the field)")
	fs.StringSliceVar(&c.Hosts, "hosts", c.Hosts, "hosts")
}

func TestPointerConfig(t *testing.T) {
	defaults := &boundConfig{Workers: 2, Mode: "fast"}
	var got *boundConfig
	h := newHive(cell.Config(defaults), cell.Invoke(func(c *boundConfig) { got = c }))
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	h.RegisterFlags(fs)
	if err := fs.Parse([]string{"--workers=5", "--hosts=a,b"}); err != nil {
		t.Fatal(err)
	}
	if err := h.Populate(); err != nil {
		t.Fatal(err)
	}
	want := boundConfig{Workers: 5, Mode: "fast", Hosts: []string{"a", "b"}}
	if got == nil || got.Workers != want.Workers || got.Mode != want.Mode || !slices.Equal(got.Hosts, want.Hosts) {
		t.Fatalf("config = %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(*defaults, boundConfig{Workers: 2, Mode: "fast"}) {
		t.Fatalf("defaults were modified: %+v", defaults)
	}
}

type unmatchedConfig struct{ Port int }

func (def unmatchedConfig) Flags(fs *pflag.FlagSet) { fs.Int("listen-port", def.Port, "") }

type otherPortConfig struct{ Port int }

func (def otherPortConfig) Flags(fs *pflag.FlagSet) { fs.Int("port", def.Port, "") }

func TestConfigDeclarationErrors(t *testing.T) {
	tests := []struct {
		name    string
		cells   []cell.Cell
		wantErr error
		wantMsg string
	}{
		{"flag without field", []cell.Cell{cell.Config(unmatchedConfig{})}, cell.ErrConfigField, "--listen-port"},
		{"flag declared twice", []cell.Cell{cell.Config(serverDefaults), cell.Module("m", "M", cell.Config(otherPortConfig{}))}, cell.ErrDuplicateFlag, "--port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newHive(tt.cells...).Populate()
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("Populate = %v, want %v mentioning %q", err, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	if got := hive.EnvName("AGENT", "metrics-addr.v2"); got != "AGENT_METRICS_ADDR_V2" {
		t.Fatalf("EnvName = %q", got)
	}
}
