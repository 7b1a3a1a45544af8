// Package profile writes what an administrator hands the user of a
// remote-access connection, from the gateway's own loaded config so that
// the two cannot disagree: an Apple configuration profile
// (.mobileconfig: a com.apple.vpn.managed payload of VPNType IKEv2 and
// the CA as a com.apple.security.root payload), a PowerShell script for
// Windows' built-in client (Add-VpnConnection and
// Set-VpnConnectionIPsecConfiguration), or a swanctl.conf connection for
// strongSwan (charon, the strongSwan apps).
//
// Apple's and Windows' clients offer a single combination of algorithms;
// the profile asks for the first combination of the connection's own
// proposals that the client can express (suite.go), and a connection or
// proposal list the client cannot express is an error naming what is
// missing. strongSwan's client takes the proposal lists as they are.
//
// The functions only read the config; they are safe for concurrent use
// with anything that does not modify it.
package profile
