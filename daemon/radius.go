package daemon

import (
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/ipsecd/ipsecd/config"
	"github.com/ipsecd/ipsecd/eapradius"
)

// radiusKeeper holds the RADIUS client of eap_radius:, made when IKE
// starts and closed when the daemon stops. The IKE daemon takes it at
// its start; a reload that changes eap_radius: is logged as taking
// effect at the next start, since the conversations under way hold the
// client they began with.
type radiusKeeper struct {
	mu       sync.Mutex // guards the fields below
	client   *eapradius.Client
	acct     *eapradius.Accounting // nil without accounting: true
	interval time.Duration         // accounting_interval
	cfg      eapradius.Config      // what client was made from (secrets included)
}

// start makes the client of e, nil without e (or when New refuses it,
// logged: the connections with remote auth eap-radius are then left
// out by the IKE daemon, saying why).
func (k *radiusKeeper) start(e *config.EAPRADIUS, log logrus.FieldLogger) *eapradius.Client {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e == nil {
		return nil
	}
	if k.client != nil {
		return k.client
	}
	cfg := e.ClientConfig()
	cfg.Log = log.WithField("part", "radius")
	c, err := eapradius.New(cfg)
	if err != nil {
		log.WithError(err).Error("radius: no client")
		return nil
	}
	cfg.Log = nil
	k.client, k.cfg, k.interval = c, cloneSecrets(cfg), e.AccountingInterval
	if e.Accounting {
		// Accounting-On: the server closes what it still holds open
		// of our previous life (RFC 2866 §5.1).
		k.acct = c.NewAccounting()
		k.acct.On(nil)
	}
	log.WithFields(logrus.Fields{"servers": len(cfg.Servers), "accounting": e.Accounting}).Info("radius: client ready")
	return c
}

// accounting returns the accounting and its default interim interval.
func (k *radiusKeeper) accounting() (*eapradius.Accounting, time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.acct, k.interval
}

// reload warns when a reloaded eap_radius: differs from the running one.
func (k *radiusKeeper) reload(e *config.EAPRADIUS, log logrus.FieldLogger) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var cfg eapradius.Config
	if e != nil {
		cfg = e.ClientConfig()
	}
	if k.client == nil && e == nil || k.client != nil && reflect.DeepEqual(cfg, k.cfg) {
		return
	}
	log.Warn("reload: eap_radius: changed; the running RADIUS client is kept until the daemon restarts")
}

// stop sends Accounting-Off (after the sessions' Stops, which the IKE
// daemon sent as it ended them), waits for the records in flight, and
// closes the client: requests in flight end.
func (k *radiusKeeper) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.acct != nil {
		off := make(chan error, 1)
		k.acct.Off(func(err error) { off <- err })
		<-off // bounded by the servers' tries
		k.acct.Close()
		k.acct = nil
	}
	if k.client != nil {
		k.client.Close()
		k.client = nil
	}
	for _, s := range k.cfg.Servers {
		clear(s.Secret)
	}
	k.cfg = eapradius.Config{}
}

// cloneSecrets copies cfg with secrets of its own: the config file's are
// wiped when a reload replaces it.
func cloneSecrets(cfg eapradius.Config) eapradius.Config {
	cfg.Servers = append([]eapradius.Server(nil), cfg.Servers...)
	for i := range cfg.Servers {
		cfg.Servers[i].Secret = append([]byte(nil), cfg.Servers[i].Secret...)
	}
	return cfg
}

// stats returns the servers' counters, none without a client.
func (k *radiusKeeper) stats() []eapradius.ServerStats {
	k.mu.Lock()
	c := k.client
	k.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.Stats()
}

var descRADIUS = prometheus.NewDesc("ipsecd_radius_packets_total",
	"RADIUS datagrams of eap_radius by server and kind: request (sent, retransmissions included), retransmission, timeout (a request the server never answered), accept, reject, challenge, accounting_response (verified answers), mismatch (an answer whose Response Authenticator or Message-Authenticator did not check out: a wrong shared secret, or forgery), malformed.",
	[]string{"server", "kind"}, nil)

func collectRADIUS(ch chan<- prometheus.Metric, servers []eapradius.ServerStats) {
	for _, s := range servers {
		for _, v := range []struct {
			kind string
			n    uint64
		}{
			{"request", s.Requests}, {"retransmission", s.Retransmits}, {"timeout", s.Timeouts},
			{"accept", s.Accepts}, {"reject", s.Rejects}, {"challenge", s.Challenges}, {"accounting_response", s.AcctResponses},
			{"mismatch", s.Mismatches}, {"malformed", s.Malformed},
		} {
			emit(ch, descRADIUS, prometheus.CounterValue, v.n, s.Name, v.kind)
		}
	}
}
