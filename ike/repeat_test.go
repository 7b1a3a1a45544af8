package ike

import (
	"net/netip"
	"testing"

	"github.com/ipsecd/ipsecd/ike/message"
)

// stranger is an address that is not the peer's: where a forged or
// replayed datagram claims to come from (the victim of a reflection).
var stranger = netip.MustParseAddrPort("203.0.113.66:500")

// headerOnly is a datagram of nothing but an IKE header, as anyone who
// saw the SPIs and message ID of a request can write it.
func headerOnly(ispi, rspi uint64, ex message.ExchangeType, id uint32) []byte {
	return message.Encode(&message.Message{HeaderFields: message.HeaderFields{
		ISPI: ispi, RSPI: rspi, Exchange: ex, Flags: message.FlagInitiator, MessageID: id}})
}

// answered returns how many bytes s sends for raw arriving from remote:
// every datagram of the answer (all its fragments).
func answered(s *SA, raw []byte, remote netip.AddrPort) int {
	local, _ := s.Addrs()
	out, _ := s.HandleFrom(raw, local, remote, t0)
	if out == nil {
		return 0
	}
	n := 0
	for _, d := range s.Packets(out) {
		n += len(d)
	}
	return n
}

// TestRepeatCacheAnswersOnlyTheRequest: the answer kept for a repeated
// request (RFC 7296 §2.1) goes only to a byte-identical repeat of that
// request (for a fragmented one, of its first fragment, RFC 7383 §2.6.1),
// from the peer's address. A header with the SPIs and message ID of the
// last request, from anywhere, drew the whole fragmented IKE_AUTH answer:
// a reflection amplified 129 times.
func TestRepeatCacheAnswersOnlyTheRequest(t *testing.T) {
	ci, cr := bigChainConfigs(t)
	ini, res, auth := exchangeAuth(t, ci, cr)
	ispi, rspi := res.SPIs()
	_, peer := res.Addrs()

	// Before IKE_AUTH: the IKE_SA_INIT answer is kept too.
	initReq := res.hs.initReq
	for _, tt := range []struct {
		name string
		raw  []byte
		from netip.AddrPort
	}{
		{"IKE_SA_INIT header only, from a stranger", headerOnly(ispi, 0, message.IKESAInit, 0), stranger},
		{"IKE_SA_INIT header only, from the peer", headerOnly(ispi, 0, message.IKESAInit, 0), peer},
		{"IKE_SA_INIT repeated, from a stranger", initReq, stranger},
	} {
		if n := answered(res, tt.raw, tt.from); n != 0 {
			t.Errorf("%s: %d bytes in, %d bytes out (×%.0f); want no answer", tt.name, len(tt.raw), n, float64(n)/float64(len(tt.raw)))
		}
	}
	if n := answered(res, initReq, peer); n != len(res.hs.initResp) {
		t.Fatalf("IKE_SA_INIT repeated by the peer: %d bytes answered, want the %d of the kept answer", n, len(res.hs.initResp))
	}

	var reply []byte
	for _, f := range auth {
		out, err := res.Handle(f, t0)
		if err != nil {
			t.Fatal(err)
		}
		reply = out
	}
	answer := res.Packets(reply)
	for _, f := range answer {
		if _, err := ini.Handle(f, t0); err != nil {
			t.Fatal(err)
		}
	}
	checkPair(t, ini, res)
	whole := 0
	for _, f := range answer {
		whole += len(f)
	}

	for _, tt := range []struct {
		name string
		raw  []byte
		from netip.AddrPort
	}{
		{"IKE_AUTH header only, from a stranger", headerOnly(ispi, rspi, message.IKEAuth, 1), stranger},
		{"IKE_AUTH header only, from the peer", headerOnly(ispi, rspi, message.IKEAuth, 1), peer},
		{"IKE_AUTH first fragment repeated, from a stranger", auth[0], stranger},
		{"IKE_AUTH last fragment repeated, from the peer", auth[len(auth)-1], peer},
	} {
		if n := answered(res, tt.raw, tt.from); n != 0 {
			t.Errorf("%s: %d bytes in, %d bytes out (×%.0f); want no answer", tt.name, len(tt.raw), n, float64(n)/float64(len(tt.raw)))
		}
	}
	if n := answered(res, auth[0], peer); n != whole {
		t.Fatalf("IKE_AUTH repeated by the peer: %d bytes answered, want the whole answer's %d", n, whole)
	}

	// An SA the peer deleted still answers the delete's repeat, and
	// nothing else.
	del, err := ini.Delete(t0)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := res.Handle(del, t0)
	if err != nil || ack == nil || res.State() != StateDeleted {
		t.Fatalf("delete: %v, responder %v", err, res.State())
	}
	if n := answered(res, headerOnly(ispi, rspi, message.Informational, 2), stranger); n != 0 {
		t.Errorf("deleted SA, INFORMATIONAL header only from a stranger: %d bytes out; want no answer", n)
	}
	if n := answered(res, del, stranger); n != 0 {
		t.Errorf("deleted SA, the delete repeated from a stranger: %d bytes out; want no answer", n)
	}
	if n := answered(res, del, peer); n != len(ack) {
		t.Errorf("deleted SA, the delete repeated by the peer: %d bytes out, want the %d of the answer", n, len(ack))
	}
}
