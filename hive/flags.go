package hive

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/steadystate/steadystate/hive/cell"
)

// EnvName is the environment variable that sets flag name under prefix:
// EnvName("AGENT", "metrics-addr") is "AGENT_METRICS_ADDR".
func EnvName(prefix, flag string) string {
	return prefix + "_" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(flag))
}

// applyEnv sets every flag not given on the command line from its
// environment variable, if set. A bad value is cell.ErrInvalidFlagValue
// naming the flag and the variable.
func applyEnv(fs *pflag.FlagSet, prefix string) error {
	if prefix == "" {
		return nil
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		name := EnvName(prefix, f.Name)
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("%w: --%s from $%s=%q: %v", cell.ErrInvalidFlagValue, f.Name, name, v, serr)
		}
	})
	return err
}
