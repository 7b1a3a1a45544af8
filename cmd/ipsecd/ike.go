package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/printable"
)

// cmdIKE is `ipsecd ike list|initiate|terminate|rekey`.
func cmdIKE(args []string, stdout, stderr io.Writer) error {
	verb, args, err := subcommand("ike", args, stderr, "list", "initiate", "terminate", "rekey")
	if err != nil {
		return err
	}
	if verb == "list" {
		fs := newFlags("ike list", "ike list [--json] [--control PATH | --config FILE]", stderr)
		cf := addCtlFlags(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		c, err := cf.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		sas, err := c.IKEList()
		if err != nil {
			return err
		}
		if cf.json {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			if sas == nil {
				sas = []control.IKESAInfo{}
			}
			return enc.Encode(sas)
		}
		writeIKESAs(stdout, sas)
		return nil
	}
	fs := newFlags("ike "+verb, "ike "+verb+" --ike NAME | --child NAME [--control PATH | --config FILE]", stderr)
	cf := addCtlFlags(fs)
	var t control.IKETarget
	fs.StringVar(&t.IKE, "ike", "", "the connection `NAME` (its IKE SA, with its children)")
	fs.StringVar(&t.Child, "child", "", "the child `NAME`")
	if err := parse(fs, args); err != nil {
		return err
	}
	if (t.IKE == "") == (t.Child == "") {
		return usagef("ike %s: want one of --ike NAME and --child NAME", verb)
	}
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.IKEAction("ike."+verb, t)
}

// writeIKESAs prints the SAs as swanctl --list-sas does, roughly. Each
// line is escaped (printable.Escape): identities are the peer's text,
// which must not reach the terminal with control characters in it.
func writeIKESAs(w io.Writer, sas []control.IKESAInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	defer tw.Flush()
	printf := func(format string, args ...any) {
		io.WriteString(tw, printable.Escape(fmt.Sprintf(format, args...))+"\n")
	}
	for _, s := range sas {
		role := "responder"
		if s.Initiator {
			role = "initiator"
		}
		printf("%s: %s, IKEv2, %s_i%s %s_r%s", s.Name, s.State, s.SPIInitiator, star(s.Initiator), s.SPIResponder, star(!s.Initiator))
		printf("  local  '%s' @ %s", s.LocalID, s.Local)
		printf("  remote '%s' @ %s", s.RemoteID, s.Remote)
		if len(s.LocalVIPs) > 0 {
			printf("  local virtual IPs %s, DNS %s", strings.Join(s.LocalVIPs, " "), strings.Join(s.DNS, " "))
			if len(s.DNSDomains) > 0 {
				printf("  DNS domains %s", strings.Join(s.DNSDomains, " "))
			}
		}
		if s.RemoteEAPID != "" || len(s.RemoteVIPs) > 0 {
			printf("  remote EAP identity '%s', virtual IPs %s", s.RemoteEAPID, strings.Join(s.RemoteVIPs, " "))
		}
		if s.RemoteAuth != "" && s.RemoteAuth != "psk" && s.RemoteAuth != "pubkey" {
			printf("  remote auth %s", s.RemoteAuth)
		}
		if s.Algorithms != "" {
			printf("  %s", s.Algorithms)
		}
		if len(s.KeyExchanges) > 0 {
			printf("  %s", strings.Join(s.KeyExchanges, " "))
		}
		line := "  " + role
		if !s.Established.IsZero() {
			line += fmt.Sprintf(", established %ds ago", int64(time.Since(s.Established)/time.Second))
		}
		if s.RekeyIn > 0 {
			line += fmt.Sprintf(", rekeying in %ds", s.RekeyIn)
		}
		if s.NAT {
			line += ", NAT-T"
		}
		printf("%s", line)
		for _, c := range s.Children {
			encap := ""
			if c.Encap {
				encap = "-in-UDP"
			}
			printf("  %s: %s, %s, ESP%s, if_id %d, SPIs: %s_i %s_o", c.Name, c.State, c.Mode, encap, c.IfID, c.SPIIn, c.SPIOut)
			printf("    %s", c.Algorithms)
			printf("    in  %s, %d bytes, %d packets", c.SPIIn, c.BytesIn, c.PacketsIn)
			printf("    out %s, %d bytes, %d packets", c.SPIOut, c.BytesOut, c.PacketsOut)
			times := fmt.Sprintf("    installed %ds ago", int64(time.Since(c.Installed)/time.Second))
			if c.RekeyIn > 0 {
				times += fmt.Sprintf(", rekeying in %ds", c.RekeyIn)
			}
			if c.ExpiresIn > 0 {
				times += fmt.Sprintf(", expires in %ds", c.ExpiresIn)
			}
			printf("%s", times)
			printf("    local  %s", strings.Join(c.LocalTS, " "))
			printf("    remote %s", strings.Join(c.RemoteTS, " "))
		}
	}
}

// star marks our SPI, as swanctl does.
func star(ours bool) string {
	if ours {
		return "*"
	}
	return ""
}
