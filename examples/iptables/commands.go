package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// The iptables commands, run inside the target's namespace.

// saveAsync reads tables with iptables-save in the background; the
// function it returns waits for the result, and must be called.
func (t *Target) saveAsync(ctx context.Context, tables map[string]bool) func() (map[string]*tableState, error) {
	type result struct {
		state map[string]*tableState
		err   error
	}
	done := make(chan result, 1)
	go func() {
		state := map[string]*tableState{}
		for tbl := range tables {
			st, err := t.save(ctx, tbl)
			if err != nil {
				done <- result{err: err}
				return
			}
			state[tbl] = st
		}
		done <- result{state: state}
	}()
	return func() (map[string]*tableState, error) {
		r := <-done
		return r.state, r.err
	}
}

// save reads one table with iptables-save.
func (t *Target) save(ctx context.Context, table string) (*tableState, error) {
	t.saves.Add(1)
	out, err := t.run(ctx, nil, t.saveCmd, "-t", table)
	if err != nil {
		return nil, err
	}
	state, err := parseSave(out, t.prefix)
	if err != nil {
		return nil, err
	}
	if st := state[table]; st != nil {
		return st, nil
	}
	return newTableState(), nil
}

// restore runs iptables-restore --noflush with input, which has tables
// sections. On failure it returns iptables' message too.
func (t *Target) restore(ctx context.Context, input []byte, tables int) (msg string, err error) {
	// The watch does not hear the target's own changes (ownfilter.go): for
	// one table its socket leaves nf_tables' group while the process runs,
	// else its filter drops them in the kernel, known by the process ID.
	pid := 0
	var q *quiet
	err = t.ns.Do(func() error {
		_, err := runCommandNoted(ctx, input, func(p int) {
			pid = p
			t.own.add(p)
			q = t.ownFilter.started(p, tables)
		}, t.restoreCmd, "--noflush", "--wait")
		return err
	})
	if pid != 0 {
		t.ownFilter.exited(pid, q, err == nil)
	}
	if err != nil {
		var ce *commandError
		if errors.As(err, &ce) {
			msg = ce.stderr
		}
	}
	return msg, err
}

// commandError is the failure of an iptables command.
type commandError struct {
	cmd    string
	err    error
	stderr string
}

// Error returns the command, its exit error and its message.
func (e *commandError) Error() string { return fmt.Sprintf("%s: %v: %s", e.cmd, e.err, e.stderr) }

// Unwrap returns the exit error.
func (e *commandError) Unwrap() error { return e.err }

// run runs a command inside the target's namespace and returns its
// standard output.
func (t *Target) run(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	var out []byte
	err := t.ns.Do(func() error {
		var err error
		out, err = runCommand(ctx, stdin, name, args...)
		return err
	})
	return out, err
}

// runCommand runs a command in the namespace of the calling thread and
// returns its standard output; its error is a *commandError.
func runCommand(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	return runCommandNoted(ctx, stdin, nil, name, args...)
}

// runCommandNoted is runCommand that gives started, if not nil, the
// process ID once the command has started, before the command reads its
// input.
func runCommandNoted(ctx context.Context, stdin []byte, started func(pid int), name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var input io.WriteCloser
	var err error
	switch {
	case started != nil:
		// The input goes in only once started knows the process: it can
		// change nothing before (its notifications would be taken for
		// another program's).
		if input, err = cmd.StdinPipe(); err != nil {
			return nil, &commandError{cmd: name, err: err}
		}
	case stdin != nil:
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Start()
	if err == nil {
		if started != nil {
			started(cmd.Process.Pid)
			// A write error (the process exited early) shows in Wait's
			// error and its stderr.
			input.Write(stdin)
			input.Close()
		}
		err = cmd.Wait()
	}
	if err != nil {
		return nil, &commandError{cmd: name, err: err, stderr: oneLine(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// oneLine joins the meaningful lines of iptables' error output.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "Try `") {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

var errorLineRe = regexp.MustCompile(`(?:Error occurred at line: |line )(\d+)`)

// errorLine returns the input line iptables-restore blames, or 0.
func errorLine(msg string) int {
	m := errorLineRe.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
