package sa

// selectorBenchTS are the TSSet cases of the selector benchmarks: the two
// halves of each /24 (the review's case), and UDP ports 0-1023 among a
// TCP selector first.
var selectorBenchTS = []struct {
	name string
	sel  func() Selector
}{
	{"ts-halves", func() Selector {
		return tsSel([]TS{PrefixTS(pfx("192.0.2.0/25")), PrefixTS(pfx("192.0.2.128/25"))},
			[]TS{PrefixTS(pfx("203.0.113.0/25")), PrefixTS(pfx("203.0.113.128/25"))})
	}},
	{"ts-ports", func() Selector {
		tcp, udp := PrefixTS(pfx("192.0.2.0/24")), PrefixTS(pfx("192.0.2.0/24"))
		tcp.Proto, tcp.EndPort = 6, 1023
		udp.Proto, udp.EndPort = 17, 1023
		return tsSel([]TS{tcp, udp}, []TS{PrefixTS(pfx("203.0.113.0/24"))})
	}},
}

func tsSel(src, dst []TS) Selector {
	s, err := NewSelector(src, dst)
	if err != nil {
		panic(err)
	}
	return s
}
