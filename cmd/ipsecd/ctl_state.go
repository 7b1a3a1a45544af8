// ipsecd state: the subcommands' dispatch, list, get, add and delete
// (update, flush and count are in ctl_ops.go), with the flags that name
// an SA and read its keys.

package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/ipsecd/ipsecd/control"
	"github.com/ipsecd/ipsecd/internal/keytext"
	"github.com/ipsecd/ipsecd/sa"
)

func cmdState(args []string, stdout, stderr io.Writer) error {
	verb, args, err := subcommand("state", args, stderr, "list", "get", "add", "delete", "update", "flush", "count")
	if err != nil {
		return err
	}
	switch verb {
	case "update":
		return stateUpdate(args, stdout, stderr)
	case "flush":
		return stateFlush(args, stdout, stderr)
	case "count":
		return stateCount(args, stdout, stderr)
	case "list":
		fs := newFlags("state list", "state list [--keys] [--json] [--control PATH | --config FILE]", stderr)
		cf := addCtlFlags(fs)
		keys := fs.Bool("keys", false, "also print the keys")
		if err := parse(fs, args); err != nil {
			return err
		}
		return listing(cf, stdout, control.Request{Cmd: "state.list", Keys: *keys},
			func(c *control.Client) ([]control.StateInfo, error) { return c.States(*keys) }, writeState)
	case "get", "delete":
		fs := newFlags("state "+verb, "state "+verb+" --spi SPI --dst ADDR [--dir in|out] [flags]\n"+
			"An SA is named as ip xfrm names it, by SPI and outer destination; --dir tells apart an inbound\n"+
			"and an outbound SA that share both.", stderr)
		cf := addCtlFlags(fs)
		var keys *bool
		if verb == "get" {
			keys = fs.Bool("keys", false, "also print the keys")
		}
		idf := addStateIDFlags(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		id, err := idf.id()
		if err != nil {
			return err
		}
		c, err := cf.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		if verb == "delete" {
			return c.DeleteState(id)
		}
		if cf.json {
			return cf.printJSON(stdout, c, control.Request{Cmd: "state.get", ID: control.NewStateIDSpec(id), Keys: *keys})
		}
		st, err := c.GetState(id, *keys)
		if err != nil {
			return err
		}
		writeState(stdout, &st)
		return nil
	}
	return stateAdd(args, stdout, stderr)
}

// stateIDFlags name an SA as ip xfrm does (state get, delete, update).
type stateIDFlags struct{ spi, dst, dir *string }

func addStateIDFlags(fs *flag.FlagSet) stateIDFlags {
	return stateIDFlags{
		spi: fs.String("spi", "", "the SA's `SPI` (0x... or decimal)"),
		dst: fs.String("dst", "", "the SA's outer destination `ADDR`"),
		dir: fs.String("dir", "", "in or out (needed only when an inbound and an outbound SA share SPI and dst)"),
	}
}

func (f stateIDFlags) id() (control.StateID, error) { return stateID(*f.spi, *f.dst, *f.dir) }

func stateID(spi, dst, dir string) (control.StateID, error) {
	var id control.StateID
	if spi == "" || dst == "" {
		return id, usagef("--spi and --dst are required")
	}
	s, err := control.ParseSPI(spi)
	if err != nil {
		return id, &usageError{err.Error()}
	}
	a, err := netip.ParseAddr(dst)
	if err != nil {
		return id, usagef("--dst %q: want an IP address", dst)
	}
	var ok bool
	if id.Dir, ok = sa.ParseDir(dir); !ok && dir != "" {
		return id, usagef("--dir %q: want in or out", dir)
	}
	id.SPI, id.Dst = s, a.Unmap()
	return id, nil
}

// stateAdd is `ipsecd state add`, with the words of ip xfrm state add.
func stateAdd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("state add", "state add --src A --dst B --spi SPI --dir in|out --mode tunnel|transport --if-id N\n"+
		"    (--aead ALG --key KEY [--icv-bits N] | --enc ALG [--enc-key KEY] --auth ALG --auth-key KEY [--trunc-bits N])\n"+
		"    [--encap espinudp:SPORT:DPORT] [--replay-window N] [--esn] [--sel-src P] [--sel-dst P] [lifetime flags]\n"+
		"A KEY is 0x-hex, or @FILE to read hex from FILE (keeps it out of ps and shell history).", stderr)
	cf := addCtlFlags(fs)
	src := fs.String("src", "", "outer source `ADDR`")
	dst := fs.String("dst", "", "outer destination `ADDR`")
	spi := fs.String("spi", "", "`SPI`, 0x100..0xffffffff")
	dir := fs.String("dir", "", "in or out")
	mode := fs.String("mode", "", "tunnel or transport")
	ifID := fs.Uint("if-id", 0, "the interface's if_id `N`")
	aead := fs.String("aead", "", "AEAD `ALG`: rfc4106(gcm(aes)) or rfc7539esp(chacha20,poly1305)")
	key := fs.String("key", "", "the AEAD's `KEY`, salt included")
	icv := fs.Int("icv-bits", 0, "AEAD ICV length in `bits` (default 128)")
	enc := fs.String("enc", "", "encryption `ALG`: cbc(aes) or ecb(cipher_null)")
	encKey := fs.String("enc-key", "", "encryption `KEY`")
	auth := fs.String("auth", "", "integrity `ALG`: "+strings.Join(authNames(), ", "))
	authKey := fs.String("auth-key", "", "integrity `KEY`")
	trunc := fs.Int("trunc-bits", 0, "integrity ICV length in `bits` (default: the algorithm's, 128 for hmac(sha256))")
	encap := fs.String("encap", "", "ESP in UDP as `espinudp:SPORT:DPORT` (the ports default to 4500; omit for raw ESP)")
	window := fs.Int("replay-window", -1, "anti-replay window in packets, 0 disables (default 64 in, 0 out)")
	esn := fs.Bool("esn", false, "extended sequence numbers")
	selSrc := fs.String("sel-src", "", "only inner packets from `PREFIX`")
	selDst := fs.String("sel-dst", "", "only inner packets to `PREFIX`")
	life := addLifetimeFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}

	var c sa.Config
	var bad []string
	addr := func(flag, s string) netip.Addr {
		if s == "" {
			bad = append(bad, "--"+flag+" is required")
			return netip.Addr{}
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			bad = append(bad, fmt.Sprintf("--%s %q: want an IP address", flag, s))
		}
		return a.Unmap()
	}
	c.Src, c.Dst = addr("src", *src), addr("dst", *dst)
	if *spi == "" {
		bad = append(bad, "--spi is required")
	} else if v, err := control.ParseSPI(*spi); err != nil {
		bad = append(bad, "--"+err.Error())
	} else {
		c.SPI = v
	}
	var ok bool
	if c.Dir, ok = sa.ParseDir(*dir); !ok {
		bad = append(bad, fmt.Sprintf("--dir %q: want in or out", *dir))
	}
	if c.Mode, ok = sa.ParseMode(*mode); !ok {
		bad = append(bad, fmt.Sprintf("--mode %q: want tunnel or transport", *mode))
	}
	if *ifID > math.MaxUint32 {
		bad = append(bad, "--if-id: out of range")
	}
	c.IfID = uint32(*ifID)
	alg := func(name, keyFlag, keyArg string, bits int) *sa.Algorithm {
		if name == "" {
			if keyArg != "" {
				bad = append(bad, "--"+keyFlag+" given without its algorithm")
			}
			return nil
		}
		a := &sa.Algorithm{Name: name, Bits: bits}
		if keyArg != "" {
			k, err := readKey(keyArg, stderr)
			if err != nil {
				bad = append(bad, "--"+keyFlag+": "+err.Error())
			}
			a.Key = k
		}
		return a
	}
	c.AEAD = alg(*aead, "key", *key, *icv)
	c.Enc = alg(*enc, "enc-key", *encKey, 0)
	c.Auth = alg(*auth, "auth-key", *authKey, *trunc)
	if *encap != "" {
		e, err := parseEncap(*encap)
		if err != nil {
			bad = append(bad, "--encap: "+err.Error())
		}
		c.Encap = e
	}
	switch {
	case *window < -1 || *window > math.MaxUint32:
		bad = append(bad, fmt.Sprintf("--replay-window %d: out of range", *window))
	case *window >= 0:
		c.ReplayWindow = uint32(*window) // sa.Check says if it is too large
	default:
		c.ReplayWindow = sa.DefaultReplayWindowFor(c.Dir)
	}
	c.ESN = *esn
	pfx := func(flag, s string) netip.Prefix {
		if s == "" {
			return netip.Prefix{}
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				bad = append(bad, fmt.Sprintf("--%s %q: want a CIDR prefix", flag, s))
				return netip.Prefix{}
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		return p
	}
	c.Selector = sa.Selector{Src: pfx("sel-src", *selSrc), Dst: pfx("sel-dst", *selDst)}
	lt, err := life.lifetime(sa.Lifetime{})
	if err != nil {
		bad = append(bad, strings.Split(err.Error(), "\n")...)
	}
	c.Lifetime = lt
	c.FillDefaults()
	if err := usageErrors(bad, func() error { return sa.Check(&c) }); err != nil {
		return err
	}
	cl, err := cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	return cl.AddState(c)
}

// readKey reads a KEY argument: 0x-hex, or @FILE holding hex text, read
// by the config file's key_file reader (a regular file of at most 4 KiB:
// not a FIFO that would hang, nor /dev/zero), which also warns, on
// stderr, about a file that others can read or change. Errors show
// neither the key nor the file name, which may be a key given after the @.
func readKey(arg string, stderr io.Writer) ([]byte, error) {
	path, ok := strings.CutPrefix(arg, "@")
	if !ok {
		return keytext.ParseHex(arg)
	}
	k, warnings, err := keytext.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("@FILE: %w", err)
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	return k, nil
}

// parseEncap reads espinudp:SPORT:DPORT (the ports default to
// sa.DefaultEncapPort).
func parseEncap(s string) (*sa.Encap, error) {
	parts := strings.Split(s, ":")
	if parts[0] != "espinudp" || len(parts) > 3 {
		return nil, fmt.Errorf("%q: want espinudp:SPORT:DPORT", s)
	}
	e := &sa.Encap{SrcPort: sa.DefaultEncapPort, DstPort: sa.DefaultEncapPort}
	for i, dst := range []*uint16{&e.SrcPort, &e.DstPort} {
		if i+1 < len(parts) {
			p, err := strconv.ParseUint(parts[i+1], 10, 16)
			if err != nil || p == 0 {
				return nil, fmt.Errorf("%q: port %q is not 1..65535", s, parts[i+1])
			}
			*dst = uint16(p)
		}
	}
	return e, nil
}
