package iptables

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// HookComment is the comment of the jump rules that hook the target's
// chains into the built-in chains.
const HookComment = "steadystate:hook"

// tableState is what iptables-save shows of one table, as far as the
// target cares: which chains exist, the rules of its own chains, and its
// hook rules. Foreign rules are only skipped over.
type tableState struct {
	chains map[string]bool     // every chain of the table
	owned  map[string][]string // the rules (whole lines) of each owned chain, in order
	hooks  map[hookKey]int     // number of hook rules from a chain to an owned chain
}

func newTableState() *tableState {
	return &tableState{chains: map[string]bool{}, owned: map[string][]string{}, hooks: map[hookKey]int{}}
}

// hookKey names a hook: a jump from chain From into the owned chain To.
type hookKey struct{ From, To string }

// parseSave parses iptables-save output. Rules are kept only in chains
// whose name starts with prefix+"-" (the target's own) and, in other
// chains, only lines that mention HookComment are examined. Errors name
// the line.
func parseSave(data []byte, prefix string) (map[string]*tableState, error) {
	owned := prefix + "-"
	tables := map[string]*tableState{}
	var cur *tableState
	for n := 1; len(data) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimRight(line, "\r")
		bad := func(why string) error {
			return fmt.Errorf("iptables-save output line %d %q: %s", n, truncate(line), why)
		}
		switch {
		case len(line) == 0 || line[0] == '#':
		case line[0] == '*':
			name := string(line[1:])
			if name == "" {
				return nil, bad("empty table name")
			}
			cur = tables[name]
			if cur == nil {
				cur = newTableState()
				tables[name] = cur
			}
		case string(line) == "COMMIT":
			if cur == nil {
				return nil, bad("COMMIT outside a table")
			}
			cur = nil
		case line[0] == ':':
			if cur == nil {
				return nil, bad("chain outside a table")
			}
			name, _, _ := strings.Cut(string(line[1:]), " ")
			if name == "" {
				return nil, bad("empty chain name")
			}
			cur.chains[name] = true
		case bytes.HasPrefix(line, []byte("-A ")):
			if cur == nil {
				return nil, bad("rule outside a table")
			}
			chain, rest, _ := strings.Cut(string(line[3:]), " ")
			if chain == "" {
				return nil, bad("rule without a chain")
			}
			if strings.HasPrefix(chain, owned) {
				// Kept whole: the target recognizes its rules by their
				// text (see identify).
				cur.owned[chain] = append(cur.owned[chain], string(line))
			} else if strings.Contains(rest, HookComment) {
				args, err := splitSaveArgs(rest)
				if err != nil {
					return nil, bad(err.Error())
				}
				to := argAfter(args, "-j")
				if argAfter(args, "--comment") == HookComment && strings.HasPrefix(to, owned) {
					cur.hooks[hookKey{chain, to}]++
				}
			}
		default:
			return nil, bad("unknown line")
		}
	}
	if cur != nil {
		return nil, errors.New("iptables-save output: table without COMMIT")
	}
	return tables, nil
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}

// argAfter returns the argument after the first occurrence of opt.
func argAfter(args []string, opt string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == opt {
			return args[i+1]
		}
	}
	return ""
}

// splitSaveArgs splits a line of iptables-save output: blanks separate
// arguments; double quotes group, and inside them \" and \\ stand for "
// and \.
func splitSaveArgs(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inArg, inQuote := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			i++
			cur.WriteByte(s[i])
		case c == '"':
			inQuote = !inQuote
			inArg = true
		case !inQuote && (c == ' ' || c == '\t'):
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(c)
			inArg = true
		}
	}
	if inQuote {
		return nil, errors.New("unbalanced double quote")
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}
