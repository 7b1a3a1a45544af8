package underlay

import "sync/atomic"

// Counters is a snapshot of a Conn's counters.
type Counters struct {
	RxPackets, RxBytes uint64 // ESP packets handed up by ReadBatch
	TxPackets, TxBytes uint64 // ESP packets the kernel accepted from WriteBatch

	Keepalives   uint64 // NAT keepalives received and dropped (RFC 3948 §2.3)
	NonESP       uint64 // datagrams with the non-ESP marker (IKE), dropped
	HeaderErrors uint64 // too short, SPI 0, or a bad IPv4 header (XfrmInHdrError)
	Oversize     uint64 // larger than the caller's buffer, dropped
	SendErrors   uint64 // messages WriteBatch could not send (XfrmOutError)

	TxGSO uint64 // packets sent as segments of a UDP GSO send
	RxGRO uint64 // packets received as segments of a UDP GRO datagram
}

// counters are a Conn's live counters. Readers and writers add once per
// batch, not once per packet.
type counters struct {
	rxPackets, rxBytes, txPackets, txBytes atomic.Uint64
	keepalives, nonESP, headerErrors       atomic.Uint64
	oversize, sendErrors, txGSO, rxGRO     atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		RxPackets:    c.rxPackets.Load(),
		RxBytes:      c.rxBytes.Load(),
		TxPackets:    c.txPackets.Load(),
		TxBytes:      c.txBytes.Load(),
		Keepalives:   c.keepalives.Load(),
		NonESP:       c.nonESP.Load(),
		HeaderErrors: c.headerErrors.Load(),
		Oversize:     c.oversize.Load(),
		SendErrors:   c.sendErrors.Load(),
		TxGSO:        c.txGSO.Load(),
		RxGRO:        c.rxGRO.Load(),
	}
}

// add adds a batch's local tally to the live counters, skipping zeros so
// that an ordinary batch costs two or three atomic adds.
func (c *counters) add(d *Counters) {
	addNonZero(&c.rxPackets, d.RxPackets)
	addNonZero(&c.rxBytes, d.RxBytes)
	addNonZero(&c.txPackets, d.TxPackets)
	addNonZero(&c.txBytes, d.TxBytes)
	addNonZero(&c.keepalives, d.Keepalives)
	addNonZero(&c.nonESP, d.NonESP)
	addNonZero(&c.headerErrors, d.HeaderErrors)
	addNonZero(&c.oversize, d.Oversize)
	addNonZero(&c.sendErrors, d.SendErrors)
	addNonZero(&c.txGSO, d.TxGSO)
	addNonZero(&c.rxGRO, d.RxGRO)
}

func addNonZero(c *atomic.Uint64, v uint64) {
	if v != 0 {
		c.Add(v)
	}
}
