// Package filesource is a reflector.Source of a desired-state file: a
// program's own format (YAML, JSON, anything), decoded and validated by the
// program's function, reflected into its tables by a reflector.Multi (or a
// Reflector of one table).
//
// List returns the objects of the file's latest good version; the watch
// sends, on every new good version, the difference from the one before as
// Put and Delete events at one revision, followed by a Progress (the
// reflector commits the version at once, in one transaction, and its
// Revision is the version's). Revisions count the good versions the source
// read, from 1; they start again with the process.
//
// # Whole files only
//
// A half-written file is never listed, whatever the writer does:
//
//   - fsnotify watches the file's directory, not the file: an editor that
//     saves by renaming a new file over the old one replaces the inode,
//     and a ConfigMap-style update swaps a symlink; both are events in the
//     directory. A rename into place is a whole file and is read at once;
//     any other event (re)starts the settle timer (Config.SettleTime).
//   - A file written in place is read once it has been quiet for the settle
//     time: no event for that long and a modification time at least that
//     old.
//   - After decoding, the file is looked at again: it must still be the
//     same file (device, inode, size, modification time) with the same
//     bytes, and no process may hold it open for writing (a read lease,
//     fcntl F_SETLEASE, is refused while one does; where a lease cannot be
//     taken, the settle time alone guards). Otherwise the read is put off
//     by another settle time: nothing is sent and nothing is reported.
//   - A slow poll (Config.PollInterval) reads the file too, for what
//     notifications miss: a directory removed and made again, a file
//     system without notifications, a symlink whose target lives
//     elsewhere.
//   - An empty or whitespace-only file is rejected (it is what a writer
//     leaves half-way; a format's empty document, such as `{}`, removes
//     everything).
//
// # Bad files
//
// A file that cannot be read, or that Decode rejects (the error should name
// the file, the line and the entry), is reported once per distinct problem
// (the log, Config.Health Degraded, Metrics.Rejected) and changes nothing:
// the last good version stays in force. Before the first good version
// List waits (it returns when one comes, or when its context ends), so
// that nothing is pruned against a file that never parsed.
//
// Writing the file via rename (write a temporary file in the same
// directory, then rename it over the desired file) is always safe. A
// writer that closes the file between pieces and pauses for longer than
// the settle time can still be read half-way.
package filesource
