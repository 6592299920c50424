package cell

import "github.com/steadystate/steadystate/hive/internal/build"

// Config provides a value of type Cfg to the whole hive, starting from
// defaults and overridden by flags (and, through the hive, environment
// variables). Cfg declares its flags in Flags; the hive registers them on
// its command line.
//
// Two forms are supported:
//
//   - Cfg is a struct and Flags has a value receiver, declaring each flag
//     with its default from the receiver (fs.Duration("interval",
//     def.Interval, "...")). After parsing, each flag is stored in the
//     exported field whose name equals the flag name when case, '-', '_'
//     and '.' are ignored ("metrics-addr" fills MetricsAddr), or in the
//     field tagged `flag:"metrics-addr"`. Supported field types: string,
//     bool, integers, floats, time.Duration, encoding.TextUnmarshaler,
//     slices of those (from slice flags) and map[string]string (from
//     string-to-string flags). A flag without a usable field is
//     ErrConfigField.
//   - Cfg is a pointer to a struct and Flags has a pointer receiver that
//     binds each field with the fs.XxxVar functions. Each hive gets its own
//     copy of *defaults.
//
// If Cfg (or *Cfg) has a method Validate() error, it is called after the
// flags are applied; its error is wrapped in ErrInvalidConfig and should
// name the flag at fault. A value that does not parse is
// ErrInvalidFlagValue naming the flag. Two configs declaring one flag is
// ErrDuplicateFlag. The config is loaded by Populate even if nothing asks
// for it, so a bad value always fails.
func Config[Cfg Flagger](defaults Cfg) Cell {
	return newCell(build.Node{Kind: build.KindConfig, Config: build.NewConfig(defaults)}, nil)
}
