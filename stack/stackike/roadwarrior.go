package stackike

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/stack"
)

// RoadWarrior is a connection to a remote-access gateway given by the
// program instead of a config file: the user's EAP-MSCHAPv2 name and
// password, the gateway proving itself with a certificate the CA
// issued, and a virtual IP (with the gateway's DNS servers) asked for.
// It is what a laptop's VPN settings hold. New makes it the config file
// it stands for (named RoadWarriorFile in errors), run through the same
// checks as a file's, and starts it at once, again after a failure (with
// backoff) and when the gateway stops answering (DPD every
// roadWarriorDPD, dpd_action restart), until Close. An authentication
// failure (a wrong password) is not tried again, lest the gateway lock
// the user out: WaitVirtualIP returns it, and Initiate tries once more.
// An IKE SA the gateway deletes (it logged the user out) stays down
// until Initiate.
type RoadWarrior struct {
	// Gateway is the gateway's address; IKE and ESP go to its port 4500.
	Gateway netip.Addr
	// GatewayID is the identity the gateway's certificate names and it
	// proves (remote.id), e.g. vpn.corp.example.
	GatewayID string
	// CA holds the PEM certificates of the authorities that issued the
	// gateway's certificate: the trust anchors (remote.cacerts).
	CA []byte
	// User is the EAP identity (local.eap_id); Password is its
	// EAP-MSCHAPv2 password as the user types it, bytes of any value.
	// New copies the password; the caller may zero its own after New.
	User     string
	Password []byte
	// Networks are what the tunnel reaches: the netstack's routes and
	// the child's remote_ts, which the gateway may narrow. None: all of
	// IPv4 (and of IPv6 with IPv6), a full tunnel.
	Networks []netip.Prefix
	// IPv6 asks for an IPv6 virtual IP beside the IPv4 one (vips:
	// [0.0.0.0, "::"]).
	IPv6 bool
	// Local is the underlay socket's address (underlay.udp, port 4500),
	// of the Gateway's family; the zero Addr is every address of it
	// (0.0.0.0 or ::).
	Local netip.Addr
	// Proposals and ESPProposals are the IKE and ESP proposals as swanctl
	// writes them, or presets (docs/config.md); none:
	// DefaultProposals and DefaultESPProposals.
	Proposals, ESPProposals []string
}

// The proposals of a RoadWarrior that names none: what strongSwan's
// charon, and ipsecd's examples/remote-access.yaml, accept as a gateway.
var (
	DefaultProposals    = []string{"aes256-sha256-x25519", "aes256gcm16-prfsha384-ecp384"}
	DefaultESPProposals = []string{"aes128gcm16", "aes256gcm16"}
)

// The names a RoadWarrior's config gives: RoadWarriorFile is the file of
// its errors, and RoadWarriorConnection, its connection and child, is
// what Initiate, Terminate and List name.
const (
	RoadWarriorFile       = "stackike.RoadWarrior"
	RoadWarriorConnection = "vpn"
	// caPath is the path of RoadWarrior.CA in the config, read from
	// memory (config.ParseMem).
	caPath = "RoadWarrior.CA"
	// roadWarriorDPD is how often a RoadWarrior checks that a quiet
	// gateway is still there (dpd_delay): a gateway gone is noticed
	// within a minute or two, with DPD's retransmissions.
	roadWarriorDPD = "30s"
)

// file returns the config r stands for.
func (r *RoadWarrior) file() (*config.Config, error) {
	gateway, local, err := r.addrs()
	if err != nil {
		return nil, err
	}
	nets := r.Networks
	if len(nets) == 0 {
		nets = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
		if r.IPv6 {
			nets = append(nets, netip.MustParsePrefix("::/0"))
		}
	}
	vips := []string{"0.0.0.0"}
	if r.IPv6 {
		vips = append(vips, "::")
	}
	or := func(s, def []string) []string {
		if len(s) == 0 {
			return def
		}
		return s
	}
	type obj = map[string]any
	// JSON is YAML (1.2's flow style), and json.Marshal quotes every
	// text the program gave, whatever its bytes. The password goes as
	// 0x-hex of its bytes, which the file reads back as those bytes: a
	// password that starts with 0x or 0s is not taken for hex or base64.
	conn := obj{
		"name":         RoadWarriorConnection,
		"remote_addrs": []netip.Addr{gateway},
		"vips":         vips,
		"proposals":    or(r.Proposals, DefaultProposals),
		"dpd_delay":    roadWarriorDPD,
		"local":        obj{"auth": ike.AuthEAPMSCHAPv2, "eap_id": r.User},
		"remote":       obj{"auth": "pubkey", "id": r.GatewayID, "cacerts": []string{caPath}},
		"children": []obj{{"name": RoadWarriorConnection, "if_id": 1, "local_ts": []string{"dynamic"}, "remote_ts": nets,
			"esp_proposals": or(r.ESPProposals, DefaultESPProposals), "start_action": "start", "dpd_action": "restart"}},
	}
	if !local.IsUnspecified() {
		conn["local_addrs"] = []netip.Addr{local} // IKE's source: the socket's
	}
	// The password's JSON text, in bytes that can be zeroed (a string
	// cannot): "0x", the hex, the quotes.
	secret := make([]byte, 2*len(r.Password)+4)
	copy(secret, `"0x`)
	hex.Encode(secret[3:], r.Password)
	secret[len(secret)-1] = '"'
	defer clear(secret)
	text, err := json.Marshal(obj{
		"underlay":    obj{"udp": netip.AddrPortFrom(local, ike.NATTPort).String()},
		"interfaces":  []obj{{"name": RoadWarriorConnection, "if_id": 1, "routes": nets}},
		"connections": []obj{conn},
		"secrets":     []obj{{"type": "eap", "ids": []string{r.User}, "secret": json.RawMessage(secret)}},
	})
	if err != nil {
		return nil, fmt.Errorf("stackike: RoadWarrior: %w", err)
	}
	defer clear(text) // it holds the password
	return config.ParseMem(RoadWarriorFile, text, map[string][]byte{caPath: r.CA})
}

// addrs checks r and returns the gateway's address and the socket's
// (every address of the gateway's family unless Local says one).
func (r *RoadWarrior) addrs() (gateway, local netip.Addr, err error) {
	gateway, local = r.Gateway.Unmap(), r.Local.Unmap()
	bad := func(field, msg string) error {
		return fmt.Errorf("%w: RoadWarrior.%s: %s", stack.ErrInvalidConfig, field, msg)
	}
	switch {
	case !gateway.IsValid() || gateway.IsUnspecified():
		return gateway, local, bad("Gateway", "missing; want the gateway's IP address")
	case r.GatewayID == "":
		return gateway, local, bad("GatewayID", "missing; want the identity the gateway's certificate names (vpn.corp.example)")
	case len(r.CA) == 0:
		return gateway, local, bad("CA", "missing; want the PEM certificate of the CA that issued the gateway's certificate")
	case r.User == "":
		return gateway, local, bad("User", "missing; want the EAP identity (the user name)")
	case len(r.Password) == 0:
		return gateway, local, bad("Password", "empty")
	case local.IsValid() && local.Is4() != gateway.Is4():
		return gateway, local, bad("Local", fmt.Sprintf("%v: not of the Gateway's family (%v)", local, gateway))
	}
	if _, err := ike.ParseCertificatesPEM(r.CA); err != nil {
		return gateway, local, bad("CA", err.Error())
	}
	switch {
	case local.IsValid():
	case gateway.Is4():
		local = netip.IPv4Unspecified()
	default:
		local = netip.IPv6Unspecified()
	}
	return gateway, local, nil
}
