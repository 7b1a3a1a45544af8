package ikenode

import (
	"net/netip"

	"github.com/ipsecd/ipsecd/ike"
	"github.com/ipsecd/ipsecd/ike/message"
)

// saIndex finds the IKE SA of a datagram, and counts the half-open
// responder SAs in all and per peer address, in O(1) whatever their
// number: a flood of IKE_SA_INIT requests makes half-open SAs, and no
// datagram may walk them. Owned by the Run goroutine, like the SAs.
//
// An SA is added once (Daemon.add), updated after every call that may
// change its SPIs or state (afterCall, down), and removed when the
// IKE daemon forgets it.
type saIndex struct {
	// bySPIs holds every SA under its SPIs as it last reported them:
	// (SPIi, 0) for our IKE_SA_INIT before the answer.
	bySPIs map[[2]uint64]*ikeSA
	// byInit holds the SAs made by an IKE_SA_INIT under its SPIi and
	// the peer's address: a repeated request, or the answer to ours
	// (which brings the SPIr we do not know yet), finds them there.
	byInit map[initKey]*ikeSA
	// halfOpen counts the responder SAs waiting for IKE_AUTH, and
	// halfOpenFrom those per peer address.
	halfOpen     int
	halfOpenFrom map[netip.Addr]int
}

type initKey struct {
	ispi   uint64
	remote netip.Addr
}

func newSAIndex() saIndex {
	return saIndex{bySPIs: map[[2]uint64]*ikeSA{}, byInit: map[initKey]*ikeSA{}, halfOpenFrom: map[netip.Addr]int{}}
}

// find returns the SA a message from remote belongs to: the one whose
// SPIs it names, or, for an IKE_SA_INIT (a response to our request, or
// a repeated request, before the responder's SPI is known), whose
// initiator SPI and peer address it has.
func (ix *saIndex) find(h message.Header, remote netip.Addr) *ikeSA {
	if x := ix.bySPIs[[2]uint64{h.ISPI(), h.RSPI()}]; x != nil {
		return x
	}
	if h.ExchangeType() == message.IKESAInit {
		return ix.byInit[initKey{h.ISPI(), remote.Unmap()}]
	}
	return nil
}

// add indexes x, new to the IKE daemon.
func (ix *saIndex) add(x *ikeSA) {
	i, r := x.sa.SPIs()
	x.spis = [2]uint64{i, r}
	ix.bySPIs[x.spis] = x
	if st := x.sa.State(); st == ike.StateInitSent || st == ike.StateInitDone {
		_, remote := x.sa.Addrs()
		k := initKey{i, remote.Addr().Unmap()}
		if ix.byInit[k] == nil {
			ix.byInit[k] = x
			x.init = k
		}
	}
	ix.update(x)
}

// update follows x's SPIs (ours learns the responder's from its answer)
// and its leaving the half-open state.
func (ix *saIndex) update(x *ikeSA) {
	i, r := x.sa.SPIs()
	if spis := [2]uint64{i, r}; spis != x.spis {
		if ix.bySPIs[x.spis] == x {
			delete(ix.bySPIs, x.spis)
		}
		x.spis = spis
		ix.bySPIs[spis] = x
	}
	open := !x.ended && x.sa.State() == ike.StateInitDone
	if open == x.halfOpen {
		return
	}
	x.halfOpen = open
	_, remote := x.sa.Addrs()
	a := remote.Addr().Unmap()
	if open {
		x.halfOpenFrom = a
		ix.halfOpen++
		ix.halfOpenFrom[a]++
		return
	}
	ix.halfOpen--
	if ix.halfOpenFrom[x.halfOpenFrom]--; ix.halfOpenFrom[x.halfOpenFrom] <= 0 {
		delete(ix.halfOpenFrom, x.halfOpenFrom)
	}
}

// remove forgets x, which ended.
func (ix *saIndex) remove(x *ikeSA) {
	ix.update(x) // no longer half-open
	if ix.bySPIs[x.spis] == x {
		delete(ix.bySPIs, x.spis)
	}
	if x.init.ispi != 0 && ix.byInit[x.init] == x {
		delete(ix.byInit, x.init)
	}
}

// halfOpenLimited decides about an IKE_SA_INIT request from remote that
// passed the cookie check (strongSwan's order): with blockThreshold
// half-open SAs from that address, or limit in all, it is dropped
// (block_threshold, init_limit_half_open; 0 means no limit). Cookies
// prove only that a sender receives at its address; these bound what
// one such address, and all of them, may hold.
func (ix *saIndex) halfOpenLimited(remote netip.Addr, blockThreshold, limit int) (blocked, full bool) {
	if blockThreshold > 0 && ix.halfOpenFrom[remote.Unmap()] >= blockThreshold {
		return true, false
	}
	return false, limit > 0 && ix.halfOpen >= limit
}
