// Package etcdtest runs real etcd clusters on 127.0.0.1 for tests: each
// member a process of its own (so that SIGKILL and SIGSTOP work), its data
// on tmpfs when /dev/shm exists. Other modules of the repository (the
// example agent's) use it too: Binary builds the server inside this
// module, whose go.mod holds the server's dependencies.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Binary builds the module's etcd server (v3.7, from etcdmain) once per
// test process and returns its path. It builds in this module's directory
// (found from this file's path), so that a test of another module that
// replaces this one with its directory can call it.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "steadystate-etcd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		built = filepath.Join(dir, "etcd")
		cmd := exec.Command("go", "build", "-o", built, "./etcdtest/etcd")
		cmd.Dir = moduleDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building etcd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// moduleDir is the etcd module's directory: two up from this file.
func moduleDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// Member is one etcd process.
type Member struct {
	Name             string
	ClientURL        string
	PeerURL          string
	dir              string
	cmd              *exec.Cmd
	done             chan struct{}
	stopped, started bool
}

// Cluster is a cluster of etcd processes.
type Cluster struct {
	t       testing.TB
	bin     string
	Members []*Member
	initial string
	log     *os.File
}

// StartCluster starts n members of the binary bin (Binary, or a system
// etcd) and waits until the cluster answers. The processes are killed and
// their data removed when the test ends.
func StartCluster(t testing.TB, bin string, n int) *Cluster {
	t.Helper()
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	root, err := os.MkdirTemp(base, "steadystate-etcd-")
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(root, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, log: logf}
	var initial []string
	urls := FreeURLs(t, 2*n)
	for i := range n {
		m := &Member{Name: fmt.Sprintf("m%d", i), ClientURL: urls[2*i], PeerURL: urls[2*i+1], dir: filepath.Join(root, fmt.Sprintf("m%d", i))}
		c.Members = append(c.Members, m)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	c.initial = strings.Join(initial, ",")
	t.Cleanup(func() {
		for _, m := range c.Members {
			c.kill(m)
		}
		logf.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil && len(b) > 0 {
				t.Logf("etcd log (last 4 KiB):\n%s", tail(b, 4096))
			}
		}
		os.RemoveAll(root)
	})
	for _, m := range c.Members {
		c.start(m, "new")
	}
	c.WaitHealthy()
	return c
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// FreeURLs returns n URLs http://127.0.0.1:PORT with distinct ports free
// right now. Every listener stays open until all are taken: a port closed
// at once may be handed out again by the next Listen (a cluster whose two
// members had one peer URL failed to start).
func FreeURLs(t testing.TB, n int) []string {
	var urls []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	return urls
}

func (c *Cluster) start(m *Member, state string) {
	c.t.Helper()
	m.cmd = exec.Command(c.bin,
		"--name", m.Name, "--data-dir", m.dir,
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", c.initial, "--initial-cluster-state", state,
		"--initial-cluster-token", "steadystate-test",
		"--heartbeat-interval", "50", "--election-timeout", "500",
		"--log-level", "warn")
	m.cmd.Stdout, m.cmd.Stderr = c.log, c.log
	if err := m.cmd.Start(); err != nil {
		c.t.Fatalf("starting etcd member %s: %v", m.Name, err)
	}
	m.done = make(chan struct{})
	cmd, done := m.cmd, m.done
	go func() { cmd.Wait(); close(done) }()
	m.started, m.stopped = true, false
}

// Pid is the member's process id, 0 while it is not running.
func (m *Member) Pid() int {
	if !m.started || m.cmd == nil || m.cmd.Process == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Kill kills member i with SIGKILL and waits for it to exit.
func (c *Cluster) Kill(i int) { c.kill(c.Members[i]) }

func (c *Cluster) kill(m *Member) {
	if !m.started {
		return
	}
	if m.stopped {
		m.cmd.Process.Signal(syscall.SIGCONT)
	}
	m.cmd.Process.Kill()
	<-m.done
	m.started, m.stopped = false, false
}

// Restart starts member i again on its data.
func (c *Cluster) Restart(i int) { c.start(c.Members[i], "existing") }

// Pause stops member i with SIGSTOP; Resume continues it.
func (c *Cluster) Pause(i int) {
	c.Members[i].cmd.Process.Signal(syscall.SIGSTOP)
	c.Members[i].stopped = true
}

// Resume continues member i after Pause.
func (c *Cluster) Resume(i int) {
	c.Members[i].cmd.Process.Signal(syscall.SIGCONT)
	c.Members[i].stopped = false
}

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client returns a client of every member, closed when the test ends.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	cl, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		// Find a paused or dead member within a second or two, as an agent
		// should, and go to another.
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// WaitHealthy waits until a write through the cluster succeeds.
func (c *Cluster) WaitHealthy() {
	c.t.Helper()
	cl := c.Client()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cl.Put(ctx, "/etcdtest/health", "ok")
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("etcd cluster not healthy after 30s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
