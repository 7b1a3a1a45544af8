package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/profile"
)

// defaultConfigFile is where docs/deploy.md puts the daemon's config.
const defaultConfigFile = "/etc/ipsecd/ipsecd.yaml"

// cmdProfile is `ipsecd profile apple|windows|strongswan --connection
// NAME --user ID [--config FILE] [--address HOST] [--ca FILE] [--p12
// FILE] [--out PATH]`: what an administrator hands a user of a remote-access
// connection, from the config file the daemon runs with (package
// profile). Without --out the profile goes to stdout (strongswan: its
// swanctl.conf); with it, apple and windows write the file PATH and
// strongswan the directory PATH (swanctl.conf and x509ca/), files 0600
// since a profile may hold a pre-shared key.
func cmdProfile(args []string, stdout, stderr io.Writer) error {
	kind, args, err := subcommand("profile", args, stderr, "apple", "windows", "strongswan")
	if err != nil {
		return err
	}
	fs := newFlags("profile "+kind, "profile "+kind+" --connection NAME --user ID [--config FILE] [--address HOST] [--ca FILE] [--p12 FILE] [--out PATH]", stderr)
	file := fs.String("config", defaultConfigFile, "the daemon's config `FILE`")
	var o profile.Options
	fs.StringVar(&o.Connection, "connection", "", "the gateway's connection `NAME` the user connects to")
	fs.StringVar(&o.User, "user", "", "the user's identity `ID` (IKE identity, or EAP identity with EAP)")
	fs.StringVar(&o.Address, "address", "", "where clients reach the gateway (`HOST`); default: the connection's local_addrs, else its local.id")
	ca := fs.String("ca", "", "the CA `FILE` (PEM) that issued the gateway's certificate, when neither local.cert's file nor remote.cacerts has it")
	p12 := fs.String("p12", "", "apple: the user's certificate and key as PKCS#12 `FILE`, for certificate authentication")
	out := fs.String("out", "", "write to `PATH` (strongswan: a directory) instead of stdout")
	if err := parse(fs, args); err != nil {
		return err
	}
	if o.Connection == "" || o.User == "" {
		return usagef("--connection NAME and --user ID are required")
	}
	if *p12 != "" {
		if kind != "apple" {
			return usagef("--p12 is for apple profiles")
		}
		if o.P12, err = os.ReadFile(*p12); err != nil {
			return err
		}
	}
	if *ca != "" {
		if o.CA, err = readCA(*ca); err != nil {
			return err
		}
	}
	c, err := config.Load(*file)
	if err != nil {
		var list config.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				fmt.Fprintln(stderr, e)
			}
			return errReported
		}
		return err
	}
	defer c.WipeKeys()
	write := map[string]func(*config.IKEConfig, profile.Options) ([]profile.File, error){
		"apple": profile.Apple, "windows": profile.Windows, "strongswan": profile.Swanctl,
	}[kind]
	files, err := write(&c.IKEConfig, o)
	if err != nil {
		return err
	}
	switch {
	case *out == "":
		_, err = stdout.Write(files[0].Data)
		if len(files) > 1 {
			fmt.Fprintf(stderr, "ipsecd profile: %s: written only with --out DIR\n", files[1].Name)
		}
		return err
	case kind != "strongswan":
		return os.WriteFile(*out, files[0].Data, 0o600)
	}
	for _, f := range files {
		path := filepath.Join(*out, f.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		if err := os.WriteFile(path, f.Data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// readCA reads the first certificate of the PEM file path.
func readCA(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil, fmt.Errorf("%s: no PEM certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return c, nil
		}
	}
}
