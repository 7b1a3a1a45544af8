module github.com/ipsecd/ipsecd

go 1.26.0

require (
	github.com/sirupsen/logrus v1.10.2
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
	golang.zx2c4.com/wireguard v0.0.0-20260522210424-ecfc5a8d5446
	gopkg.in/yaml.v3 v3.0.1
)

require (
	golang.org/x/net v0.62.0 // indirect
	golang.zx2c4.com/wintun v0.0.0-20230126152724-0fa3db229ce2 // indirect
)
