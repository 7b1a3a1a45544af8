package datapath_test

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/datapath"
	"github.com/ipsecd/ipsecd/datapath/datapathtest"
	"github.com/ipsecd/ipsecd/sa"
	"github.com/ipsecd/ipsecd/tun/netnstest"
	"github.com/ipsecd/ipsecd/xfrmif"
)

// TestIdleInterfaceBuffers: the transmitting workers of TUN interfaces
// that carry no traffic hold no batch buffers (128 of the MTU, 190 KiB a
// queue: 1.9 GB of heap for 10,000 interfaces).
func TestIdleInterfaceBuffers(t *testing.T) {
	const n = 20
	ns := netnstest.New(t, "idlebuf")
	reg := &xfrmif.Registry{}
	t.Cleanup(func() { reg.Close() })
	err := ns.Do(func() error {
		for i := range n {
			ifc, err := xfrmif.Create(xfrmif.Config{Name: fmt.Sprintf("ipsec%d", i), IfID: uint32(i + 1), MTU: 1400})
			if err != nil {
				return err
			}
			if err := reg.Add(ifc); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	end, _ := datapathtest.Pipe(netip.MustParseAddrPort("203.0.113.1:4500"), netip.MustParseAddrPort("203.0.113.2:4500"))
	log := logrus.New()
	log.SetOutput(io.Discard)
	e := datapath.New(sa.NewSAD(nil), reg, end, logrus.NewEntry(log))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); end.Close(); reg.Close(); e.Wait() })

	before := heapInUse()
	for _, ifc := range reg.All() {
		e.StartInterface(ctx, ifc)
	}
	time.Sleep(200 * time.Millisecond) // the workers start and block
	const maxPerInterface = 32 << 10
	if per := (heapInUse() - before) / n; per > maxPerInterface {
		t.Errorf("an idle interface's worker holds %d bytes of heap, want at most %d", per, maxPerInterface)
	}
}

func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}
