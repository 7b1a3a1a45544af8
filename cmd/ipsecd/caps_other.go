//go:build !linux

package main

import "github.com/sirupsen/logrus"

// raiseCapabilities is Linux only: elsewhere there are no capability sets
// to raise (and no TUN support; see package tun).
func raiseCapabilities(logrus.FieldLogger) {}

// capabilityHint is Linux only: elsewhere there are no capabilities to name.
func capabilityHint(error, bool) string { return "" }
