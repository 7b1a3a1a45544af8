//go:build !linux

package main

import "errors"

// inNetns fails: network namespaces are Linux's, and so is the root demo.
func inNetns(ns string, fn func() error) error {
	return errors.New("network namespaces are supported on Linux only")
}
