// Package testdeps holds one test: that every external command the
// project's tests and benchmark run is listed, with its Debian package, in
// scripts/test.sh, which installs those packages and then checks that each
// command is present. Together they keep the suite passing on a fresh
// machine, where only what the script installs is there.
package testdeps
