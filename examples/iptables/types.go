package iptables

import (
	"errors"
	"fmt"
	"strings"

	"github.com/steadystate/steadystate/reconciler"
)

// Rule is one desired iptables rule. Objects are immutable once inserted
// into a table: clone, modify the clone, insert it.
//
// A rule lives in the target's own chain for a built-in chain: a rule with
// Table "filter" and Chain "INPUT" is put into the chain
// "<prefix>-INPUT" (STEADYSTATE-INPUT by default), which the target creates
// and hooks from INPUT. (Table, Chain, Name) is the primary key (see Key).
type Rule struct {
	// Table is the iptables table: filter, nat, mangle, raw or security.
	Table string `json:"table" yaml:"table"`
	// Chain is the built-in chain the rule hooks into, e.g. INPUT,
	// FORWARD, POSTROUTING; it must exist in Table.
	Chain string `json:"chain" yaml:"chain"`
	// Name identifies the rule within its table and chain; with Priority
	// it orders the chain.
	Name string `json:"name" yaml:"name"`
	// Priority orders the rules of a chain: lower first, ties by Name.
	Priority int `json:"priority,omitempty" yaml:"priority,omitempty"`
	// Spec is the rule as iptables arguments without the command and
	// chain, e.g. "-p tcp --dport 22 -j ACCEPT". Arguments with spaces
	// are written in double quotes. See Validate.
	Spec string `json:"spec" yaml:"spec"`
	// Status is the reconciliation status, written by the reconciler.
	Status reconciler.Status `json:"status,omitzero" yaml:"status,omitempty"`
}

// Limits of Validate.
const (
	// MaxNameLen is the longest Name.
	MaxNameLen = 200
	// MaxSpecLen is the longest Spec.
	MaxSpecLen = 4096
)

// builtinChains lists the built-in chains of each supported table.
var builtinChains = map[string][]string{
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":      {"PREROUTING", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// StandardTargets are the targets a Spec may jump to with -j or -g: the
// built-in verdicts and the usual extension targets. Jumps into other
// chains are refused, so a desired rule can never tie the target's chains
// to chains it does not own.
var StandardTargets = []string{
	"ACCEPT", "DROP", "RETURN", "REJECT", "QUEUE", "LOG", "NFLOG", "NFQUEUE",
	"MASQUERADE", "SNAT", "DNAT", "REDIRECT", "NETMAP", "MARK", "CONNMARK",
	"SECMARK", "CONNSECMARK", "CT", "NOTRACK", "TCPMSS", "TPROXY", "DSCP",
	"TOS", "TTL", "HL", "CLASSIFY", "AUDIT", "CHECKSUM", "SET", "TRACE",
	"TEE", "SYNPROXY", "HMARK", "IDLETIMER", "LED",
}

var standardTargets = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range StandardTargets {
		m[t] = true
	}
	return m
}()

// forbiddenOptions select a command, a table or a comment: the target
// supplies the first two itself, and keeps comments for its hooks.
var forbiddenOptions = map[string]string{
	"-A": "a command", "--append": "a command", "-I": "a command", "--insert": "a command",
	"-D": "a command", "--delete": "a command", "-R": "a command", "--replace": "a command",
	"-C": "a command", "--check": "a command", "-L": "a command", "--list": "a command",
	"-S": "a command", "--list-rules": "a command", "-F": "a command", "--flush": "a command",
	"-Z": "a command", "--zero": "a command", "-N": "a command", "--new-chain": "a command",
	"-X": "a command", "--delete-chain": "a command", "-P": "a command", "--policy": "a command",
	"-E": "a command", "--rename-chain": "a command", "-t": "a table", "--table": "a table",
	"--comment": "a comment (the target reserves comments for its hooks)",
}

// Key returns the primary key "table/chain/name".
func (r *Rule) Key() string { return r.Table + "/" + r.Chain + "/" + r.Name }

// String returns the key and the spec.
func (r *Rule) String() string { return r.Key() + ": " + r.Spec }

// Clone returns a shallow copy (all fields are values).
func (r *Rule) Clone() *Rule {
	c := *r
	return &c
}

// GetStatus returns the reconciliation status.
func (r *Rule) GetStatus() reconciler.Status { return r.Status }

// SetStatus sets the status on r (which must be a clone, never a stored
// object) and returns r.
func (r *Rule) SetStatus(st reconciler.Status) *Rule {
	r.Status = st
	return r
}

// Equal reports whether r and o describe the same desired rule; the status
// is ignored and specs are compared as argument lists, so spacing does not
// matter.
func (r *Rule) Equal(o *Rule) bool {
	if r == nil || o == nil {
		return r == o
	}
	if r.Table != o.Table || r.Chain != o.Chain || r.Name != o.Name || r.Priority != o.Priority {
		return false
	}
	a, errA := canonicalSpec(r.Spec)
	b, errB := canonicalSpec(o.Spec)
	if errA != nil || errB != nil {
		return r.Spec == o.Spec
	}
	return a == b
}

// Validate checks every field. Table must be a supported table and Chain
// one of its built-in chains; Name is 1 to MaxNameLen letters, digits and
// "_.:-". Spec must be safe to place in iptables-restore input: printable
// ASCII on one line without '#', "'" or '\'; balanced double quotes; no
// command, table or comment options (-A, -t, --comment, ...); no combined
// short options (-jACCEPT); and -j/-g only into StandardTargets. Errors
// wrap ErrInvalid and name the rule and the field.
func (r *Rule) Validate() error {
	_, err := r.check(nil)
	return err
}

// canonical is Validate; it also returns the spec with normalized spacing
// and quoting, which is r.Spec itself when that is canonical already.
func (r *Rule) canonical() (string, error) {
	var buf [32]string // the arguments stay on the stack
	args, err := r.check(buf[:0])
	if err != nil {
		return "", err
	}
	if isCanonical(r.Spec) {
		return r.Spec, nil
	}
	return joinArgs(args), nil
}

// isCanonical reports whether joinArgs(splitArgs(spec)) == spec for a
// spec specArgs accepts: no quotes or tabs, and single spaces between
// arguments only.
func isCanonical(spec string) bool {
	if spec == "" {
		return true
	}
	if spec[0] == ' ' || spec[len(spec)-1] == ' ' {
		return false
	}
	for i := 0; i < len(spec); i++ {
		switch spec[i] {
		case '"', '\t':
			return false
		case ' ':
			if spec[i+1] == ' ' {
				return false
			}
		}
	}
	return true
}

// check is Validate; it also returns the spec's arguments, appended to
// buf.
func (r *Rule) check(buf []string) ([]string, error) {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w %s: field %s: %s", ErrInvalid, r.Key(), field, fmt.Sprintf(format, args...))
	}
	chains, ok := builtinChains[r.Table]
	if !ok {
		return nil, bad("table", "%q is not one of filter, nat, mangle, raw, security", r.Table)
	}
	found := false
	for _, c := range chains {
		found = found || c == r.Chain
	}
	if !found {
		return nil, bad("chain", "%q is not a built-in chain of table %s (%s)", r.Chain, r.Table, strings.Join(chains, ", "))
	}
	if err := validName(r.Name); err != "" {
		return nil, bad("name", "%q: %s", r.Name, err)
	}
	args, err := appendSpecArgs(buf, r.Spec)
	if err != nil {
		return nil, bad("spec", "%v", err)
	}
	return args, nil
}

// validName returns why name is not a valid rule name, or "".
func validName(name string) string {
	if name == "" {
		return "must not be empty"
	}
	if len(name) > MaxNameLen {
		return fmt.Sprintf("longer than %d bytes", MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			return fmt.Sprintf("character %q at byte %d is not allowed (letters, digits and \"_.:-\")", c, i)
		}
	}
	return ""
}

// specArgs splits and checks a spec (see Validate).
func specArgs(spec string) ([]string, error) { return appendSpecArgs(nil, spec) }

// appendSpecArgs is specArgs appending to args.
func appendSpecArgs(args []string, spec string) ([]string, error) {
	if len(spec) > MaxSpecLen {
		return nil, fmt.Errorf("longer than %d bytes", MaxSpecLen)
	}
	for i := 0; i < len(spec); i++ {
		switch c := spec[i]; {
		case c == '\n' || c == '\r':
			return nil, fmt.Errorf("line break at byte %d (a rule is one line)", i)
		case c == '#':
			return nil, fmt.Errorf("'#' at byte %d is not allowed (it starts a comment in iptables-restore input)", i)
		case c == '\'' || c == '\\':
			return nil, fmt.Errorf("%q at byte %d is not allowed (quote arguments with double quotes only)", c, i)
		case (c < 0x20 && c != '\t') || c >= 0x7f:
			return nil, fmt.Errorf("character %q at byte %d is not printable ASCII", c, i)
		}
	}
	args, err := appendSplitArgs(args, spec)
	if err != nil {
		return nil, err
	}
	for i, a := range args {
		if a == "" || a[0] != '-' {
			continue // a value: only options are checked
		}
		if why, ok := forbiddenOptions[a]; ok {
			return nil, fmt.Errorf("option %s selects %s and is not allowed in a spec", a, why)
		}
		if (a == "-m" || a == "--match") && i+1 < len(args) && args[i+1] == "comment" {
			return nil, fmt.Errorf("-m comment is not allowed (the target reserves comments for its hooks)")
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && isLetter(a[1]) {
			return nil, fmt.Errorf("combined short option %q is not supported (write %s %s)", a, a[:2], a[2:])
		}
		if isJump(a) {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("%s needs a target", a)
			}
			if t := args[i+1]; !standardTargets[t] {
				return nil, fmt.Errorf("%s %s: only standard targets are allowed (%s), not other chains", a, t, strings.Join(StandardTargets, " "))
			}
		}
	}
	return args, nil
}

// isJump reports whether arg selects the rule's target: -j, -g, or an
// abbreviation of --jump or --goto (which getopt accepts).
func isJump(arg string) bool {
	if arg == "-j" || arg == "-g" {
		return true
	}
	return len(arg) >= 3 && (strings.HasPrefix("--jump", arg) || strings.HasPrefix("--goto", arg))
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// splitArgs splits on blanks; a double-quoted part (without '"' or '\'
// inside) belongs to the argument it is in.
func splitArgs(s string) ([]string, error) { return appendSplitArgs(nil, s) }

// appendSplitArgs is splitArgs appending to args.
func appendSplitArgs(args []string, s string) ([]string, error) {
	for i := 0; i < len(s); {
		if s[i] == ' ' || s[i] == '\t' {
			i++
			continue
		}
		start, quoted := i, false
		inQuote := false
		for ; i < len(s) && (inQuote || (s[i] != ' ' && s[i] != '\t')); i++ {
			if s[i] == '"' {
				inQuote = !inQuote
				quoted = true
			}
		}
		if inQuote {
			return nil, errors.New("unbalanced double quote")
		}
		if quoted {
			args = append(args, strings.ReplaceAll(s[start:i], `"`, ""))
		} else {
			args = append(args, s[start:i])
		}
	}
	return args, nil
}

// needsQuote reports whether an argument must be quoted in
// iptables-restore input.
func needsQuote(a string) bool {
	if a == "" {
		return true
	}
	for i := 0; i < len(a); i++ {
		if c := a[i]; c == ' ' || c == '\t' || c == '"' {
			return true
		}
	}
	return false
}

// quoteArg quotes an argument for iptables-restore input when it needs it.
func quoteArg(a string) string {
	if needsQuote(a) {
		return `"` + strings.ReplaceAll(a, `"`, `\"`) + `"`
	}
	return a
}

// joinArgs renders args as one line of iptables-restore input.
func joinArgs(args []string) string {
	n := 0
	for _, a := range args {
		n += len(a) + 3
	}
	b := make([]byte, 0, n)
	for i, a := range args {
		if i > 0 {
			b = append(b, ' ')
		}
		if needsQuote(a) {
			b = append(b, quoteArg(a)...)
		} else {
			b = append(b, a...)
		}
	}
	return string(b)
}

// canonicalSpec returns the spec with normalized spacing and quoting.
func canonicalSpec(spec string) (string, error) {
	args, err := specArgs(spec)
	if err != nil {
		return "", err
	}
	if isCanonical(spec) {
		return spec, nil
	}
	return joinArgs(args), nil
}
