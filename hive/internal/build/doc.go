// Package build is the hive's builder: it turns a tree of cells (made by
// package cell) into a dig container, declares and loads the config flags,
// shortens dig's errors and prints the cell tree. Only package hive uses
// it; cell authors see none of it.
//
// A cell is plain data (a Node): package cell makes the nodes, this package
// reads them. Nothing here keeps per-hive state in a node, so one tree can
// be built into many hives.
//
// Build registers every cell before it calls any invoke function, then
// calls them in tree order. Bad input is an error that names the module
// ("module a.b: ...") and the function, flag or id at fault; Build never
// panics on it.
package build
