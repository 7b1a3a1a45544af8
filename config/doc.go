// Package config reads and validates the ipsecd config file (YAML), the
// "Config file" reference in docs/config.md.
//
// Parse walks YAML nodes (go.yaml.in/yaml/v3, the maintained continuation
// of gopkg.in/yaml.v3) rather than decoding into structs, so that every
// problem is reported as "FILE:LINE: field: what is wrong", with field a path
// such as states[1].aead.key (indexes count from 0). A file is accepted
// whole or refused whole: Parse collects every error it finds and returns
// them together as an ErrorList, one per line.
//
// Parse checks the syntax of each field; the rules of a state and of a
// policy are sa's (sa.Check, sa.CheckPolicy: the control socket and the
// command line apply the same ones), and Parse puts FILE:LINE: states[N].
// before the fields they name. What is checked here is about the file:
// if_ids that name its interfaces, states and policies given twice, and
// keys that two states share (sa.KeyOwners). Keys are read by
// internal/keytext, as the command line's @FILE is.
//
// Rules a user is most likely to trip over:
//
//   - Unknown keys are errors (a typo must not silently drop a setting).
//   - YAML anchors and aliases are not supported.
//   - Keys are 0x-prefixed hex ("0x0123..."), or key_file: PATH. PATH is
//     relative to the directory of the config file; the file holds the key
//     as hex text, optionally 0x-prefixed, surrounded by any whitespace. It
//     must be a regular file of at most 4 KiB, and the config file one of
//     at most MaxConfigFile (16 MiB): a FIFO or a device is refused before
//     it is read.
//   - Each secret key serves one SA, whatever the directions and algorithms
//     (sa.KeyUse): one key for an outbound and an inbound SA is refused.
//   - A state without encap is raw ESP (IP protocol 50) and needs
//     underlay.raw_esp: true; without it, its traffic could neither leave
//     nor arrive, so it is refused (NoRawESP).
//   - Key lengths follow ip xfrm: rfc4106(gcm(aes)) takes the AES key and a
//     4-byte salt (20 or 36 bytes) with icv_bits 64, 96 or 128;
//     rfc7539esp(chacha20,poly1305) takes 36 bytes with icv_bits 128;
//     cbc(aes) takes 16, 24 or 32 bytes and needs auth: hmac(sha256) with a
//     32-byte key and trunc_bits 128, hmac(sha512) with 64 bytes and 256,
//     hmac(sha384) with 48 bytes and 192, or hmac(sha1) with 20 bytes and
//     96; ecb(cipher_null) takes no key and also needs auth.
//   - replay_window defaults to 64 on inbound states (RFC 4303 prefers 64;
//     ip xfrm defaults to 0, which disables anti-replay) and to 0 on
//     outbound ones, where it has no use. It may be 0..65536.
//   - An interface's mtu defaults to 1400 and may be 576..65535, or
//     1280..65535 when the interface has an IPv6 address or route.
//
// No key is ever part of an error message or of what String and Redacted
// return. A field that may hold a key pasted by mistake (an algorithm name,
// key_file) is never shown in a message, and any other value that looks
// like key material (16 hex digits or more) is left out too.
package config
