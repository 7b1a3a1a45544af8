package ike

import (
	"runtime"
	"testing"
)

// BenchmarkHandshake measures one IKE_SA_INIT and IKE_AUTH, both sides in
// one process (so twice the CPU one side spends), per suite.
func BenchmarkHandshake(b *testing.B) {
	for _, ike := range []string{"aes256-sha256-x25519", "aes128gcm16-prfsha256-ecp256", "aes256gcm16-prfsha384-ecp384", "aes128-sha256-modp2048",
		"aes256-sha256-x25519-ke1_mlkem768", "aes256-sha256-mlkem768", "aes256-sha384-ecp384-ke1_mlkem1024"} {
		b.Run(ike, func(b *testing.B) {
			ci, cr := pairConfigs(b, []string{ike}, []string{"aes128gcm16"})
			b.ReportAllocs()
			for b.Loop() {
				// Message by message, fragments and all, until neither
				// side has anything to send: IKE_SA_INIT, IKE_AUTH and,
				// with additional key exchanges, IKE_INTERMEDIATE.
				ini, msg, _ := Initiate(ci, addrA, addrB, t0)
				res, msg, _ := Respond(cr, addrB, addrA, msg, t0)
				for to, from := ini, res; msg != nil; to, from = from, to {
					var out []byte
					for _, p := range from.Packets(msg) {
						if o, err := to.Handle(p, t0); err != nil {
							b.Fatal(err)
						} else if o != nil {
							out = o
						}
					}
					msg = out
				}
				if ini.State() != StateEstablished || len(ini.Children()) != 1 {
					b.Fatal(ini.State())
				}
			}
		})
	}
}

// BenchmarkHandshakeCert is BenchmarkHandshake with certificates on both
// sides (aes256-sha256-x25519, RFC 7427 signatures): the signing and
// verifying and the chain check, twice each.
func BenchmarkHandshakeCert(b *testing.B) {
	for _, k := range []keyKind{"rsa2048", "p256", "p384"} {
		b.Run(string(k), func(b *testing.B) {
			ci, cr, _ := certPairConfigs(b, k)
			ci.DisableFragmentation = true // one datagram per message here
			b.ReportAllocs()
			for b.Loop() {
				ini, msg, _ := Initiate(ci, addrA, addrB, t0)
				res, msg, _ := Respond(cr, addrB, addrA, msg, t0)
				msg, _ = ini.Handle(msg, t0)
				msg, _ = res.Handle(msg, t0)
				if _, err := ini.Handle(msg, t0); err != nil || len(ini.Children()) != 1 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEstablishedHeap reports the heap an established IKE SA keeps
// (B/SA: HeapInuse after runtime.GC, over both sides of saPairs
// handshakes, each SA with its first child) and the CPU of those
// handshakes per IKE SA.
func BenchmarkEstablishedHeap(b *testing.B) {
	const saPairs = 500
	ci, cr := pairConfigs(b, []string{"aes256-sha256-x25519"}, []string{"aes128gcm16"})
	for b.Loop() {
		b.StopTimer()
		before := heapInuse()
		b.StartTimer()
		sas := make([]*SA, 0, 2*saPairs)
		for range saPairs {
			ini, msg, _ := Initiate(ci, addrA, addrB, t0)
			res, msg, _ := Respond(cr, addrB, addrA, msg, t0)
			msg, _ = ini.Handle(msg, t0)
			msg, _ = res.Handle(msg, t0)
			if _, err := ini.Handle(msg, t0); err != nil || len(ini.Children()) != 1 {
				b.Fatal(err)
			}
			sas = append(sas, ini, res)
		}
		b.StopTimer()
		after := heapInuse()
		b.ReportMetric(float64(after-before)/float64(len(sas)), "B/SA")
		runtime.KeepAlive(sas)
		b.StartTimer()
	}
}

func heapInuse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
