package redis_test

// Security of the Redis side on real redis-server processes: a shard that
// cannot authenticate or set up its connection fails as that shard (named,
// counted), with no password in any error or event; TLS per shard, with a
// certificate authority made by the test.
//
// Locally the tests are skipped when redis-server is missing; in CI
// (CI=true) that fails them.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	shardedredis "github.com/shardedcache/shardedcache/redis"
	"github.com/shardedcache/shardedcache/shardedclient"

	"github.com/shardedcache/shardedcache/integration_test/internal/fixtures"
)

const (
	testPassword = "s3cret-default-pw"
	testACLUser  = "alice"
	testACLPass  = "s3cret-alice-pw"
)

// Every shard below is a redis-server that wants a password and knows the
// ACL user alice; each shard but the first two is misconfigured in its own
// way. A command on a misconfigured shard fails with a *ShardError naming
// it, counted in its Stats and reported as an event; the server's reply
// stays reachable (errors.As, redis.IsAuthError), and no error holds a
// password.
func TestRealRedisConnectionSetupErrors(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	const (
		wrongpass = "WRONGPASS invalid username-password pair or user is disabled."
		noauth    = "NOAUTH Authentication required."
	)
	cases := []struct {
		name  string
		opt   goredis.Options
		cause string // the setup step and the server's reply; "" for the good shard
		reply string
		auth  bool
	}{
		{name: "good", opt: goredis.Options{Password: testPassword}},
		{name: "acl-user", opt: goredis.Options{Username: testACLUser, Password: testACLPass}},
		{name: "wrong-password", opt: goredis.Options{Password: "not-" + testPassword},
			cause: "connection setup (auth): ", reply: wrongpass, auth: true},
		{name: "unknown-user", opt: goredis.Options{Username: "mallory", Password: testACLPass},
			cause: "connection setup (auth): ", reply: wrongpass, auth: true},
		{name: "acl-user-wrong-password", opt: goredis.Options{Username: testACLUser, Password: testPassword},
			cause: "connection setup (auth): ", reply: wrongpass, auth: true},
		{name: "no-password", reply: noauth, auth: true},
		{name: "db-out-of-range", opt: goredis.Options{Password: testPassword, DB: 99},
			cause: "connection setup (select): ", reply: "ERR DB index is out of range"},
		{name: "bad-client-name", opt: goredis.Options{Password: testPassword, ClientName: "a b"},
			cause: "connection setup (client setname): ", reply: "ERR Client names cannot contain spaces, newlines or special characters."},
	}
	opts := make([]shardedredis.ShardOptions, len(cases))
	addrs := make([]string, len(cases))
	for i, tc := range cases {
		addrs[i] = fixtures.StartRedisProc(t, bin, "", "--requirepass", testPassword,
			"--user", testACLUser, "on", ">"+testACLPass, "~*", "&*", "+@all").Addr
		o := tc.opt
		o.MaxRetries = -1
		opts[i] = shardedredis.ShardOptions{Name: tc.name, Addr: addrs[i], Options: &o}
		if o.DB != 0 {
			addrs[i] += fmt.Sprintf("/%d", o.DB) // the shard's address names its DB
		}
	}
	var (
		mu     sync.Mutex
		events []shardedclient.Event
	)
	c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: opts,
		Health: shardedredis.Health{OnEvent: func(e shardedclient.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}}})
	if err != nil {
		t.Fatal(err)
	}
	fixtures.CloseAndSettle(t, c)
	owners := fixtures.ByOwner(c, fixtures.Keys(400))
	wantStats := make([]shardedclient.ShardStats, len(cases))
	for i, tc := range cases {
		wantStats[i] = shardedclient.ShardStats{Name: tc.name, Addr: addrs[i]}
	}
	for i, tc := range cases {
		ks := owners[i]
		setErr := c.Set(ctx, ks[0], "v", 0).Err()
		get, getErr := c.Get(ctx, ks[0]).Result()
		cmds, pipeErr := c.Pipelined(ctx, func(pipe goredis.Pipeliner) error {
			pipe.Get(ctx, ks[0])
			pipe.Exists(ctx, ks[1])
			return nil
		})
		txCmds, txErr := c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
			pipe.Incr(ctx, ks[1])
			return nil
		})
		wantStats[i].Requests = 4 // four round trips: the pipelines count once
		if tc.reply == "" {
			if setErr != nil || getErr != nil || get != "v" || pipeErr != nil || txErr != nil ||
				cmds[0].(*goredis.StringCmd).Val() != "v" || cmds[1].(*goredis.IntCmd).Val() != 0 ||
				txCmds[0].(*goredis.IntCmd).Val() != 1 {
				t.Fatalf("shard %q: SET %v, GET %q %v, pipeline %v %v, transaction %v %v",
					tc.name, setErr, get, getErr, cmds, pipeErr, txCmds, txErr)
			}
			continue
		}
		wantStats[i].Errors = 4
		want := fmt.Sprintf("shardedcache: shard %d %q (%s): %s%s", i, tc.name, addrs[i], tc.cause, tc.reply)
		for _, r := range []struct {
			what string
			err  error
		}{
			{"SET", setErr}, {"GET", getErr}, {"pipeline", pipeErr}, {"pipelined GET", cmds[0].Err()},
			{"pipelined EXISTS", cmds[1].Err()}, {"transaction", txErr}, {"INCR in the transaction", txCmds[0].Err()},
		} {
			what := tc.name + ": " + r.what
			if se := fixtures.WantShardError(t, what, r.err, i, addrs[i]); se.Name != tc.name || r.err.Error() != want {
				t.Fatalf("%s: error %q (shard name %q), want %q", what, r.err, se.Name, want)
			}
			var reply goredis.Error
			if !errors.As(r.err, &reply) || reply.Error() != tc.reply {
				t.Fatalf("%s: errors.As finds the reply %v, want %q", what, reply, tc.reply)
			}
			if got := goredis.IsAuthError(r.err); got != tc.auth {
				t.Fatalf("%s: redis.IsAuthError = %v, want %v", what, got, tc.auth)
			}
			noSecret(t, what, r.err.Error())
		}
	}
	if got := c.Stats(); !slices.Equal(got, wantStats) {
		t.Fatalf("stats\n%+v\nwant\n%+v", got, wantStats)
	}
	mu.Lock()
	defer mu.Unlock()
	failures := map[string]int{}
	for _, e := range events {
		if e.Kind != shardedclient.EventFailure || e.Addr != addrs[e.Shard] || e.Name != cases[e.Shard].name {
			t.Fatalf("event %+v", e)
		}
		failures[e.Name]++
		noSecret(t, "event", fmt.Sprintf("%v %+v %#v", e, e, e))
	}
	for i, tc := range cases {
		if failures[tc.name] != int(wantStats[i].Errors) {
			t.Fatalf("%d failure events of shard %q, want %d", failures[tc.name], tc.name, wantStats[i].Errors)
		}
	}
}

// noSecret fails the test when s holds one of the test's passwords.
func noSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, pw := range []string{testPassword, testACLPass} {
		if strings.Contains(s, pw) {
			t.Fatalf("%s shows a password: %s", what, s)
		}
	}
}

// testCA is a certificate authority that a test makes.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, der: der}
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// clientConfig trusts ca alone.
func (ca *testCA) clientConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// serverFiles issues a server certificate for 127.0.0.1 and writes it, its
// key and the CA's certificate as PEM files into dir.
func (ca *testCA) serverFiles(t *testing.T, dir string) (certFile, keyFile, caFile string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) string {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	return write("server.crt", "CERTIFICATE", der), write("server.key", "PRIVATE KEY", keyDER), write("ca.crt", "CERTIFICATE", ca.der)
}

// A shard served over TLS only (no plaintext port), next to a plaintext
// shard, with a certificate authority made by the test: with the right CA,
// commands run on both shards; with a wrong CA, the TLS shard's commands
// fail with its *ShardError (the certificate's unknown authority reachable
// with errors.As), counted in its Stats, while the plaintext shard keeps
// working; the TLS server executed no command meanwhile, and every
// connection it accepted failed in the TLS handshake: the client never
// fell back to plaintext.
func TestRealRedisTLSShard(t *testing.T) {
	bin := fixtures.RealRedisBin(t)
	ca, wrongCA := newTestCA(t, "shardedcache test CA"), newTestCA(t, "another CA")
	certFile, keyFile, caFile := ca.serverFiles(t, t.TempDir())
	right := ca.clientConfig()
	tp := fixtures.StartRedisProcTLS(t, bin, right, "", "--tls-port", "{port}", "--port", "0",
		"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile,
		"--tls-auth-clients", "no")
	plain := fixtures.StartRedisProc(t, bin, "")
	newClient := func(tlsConf *tls.Config) *shardedredis.ShardedClient {
		t.Helper()
		tlsShard, plainShard := fixtures.RealShard(tp.Addr), fixtures.RealShard(plain.Addr)
		tlsShard.Name, plainShard.Name = "tls", "plain"
		tlsShard.Options.TLSConfig = tlsConf
		tlsShard.Options.DialTimeout = 5 * time.Second // a TLS handshake under -race on a busy machine: not this test's subject
		c, err := shardedredis.NewShardedClient(&shardedredis.ShardedOptions{Shards: []shardedredis.ShardOptions{tlsShard, plainShard}})
		if err != nil {
			t.Fatal(err)
		}
		fixtures.CloseAndSettle(t, c)
		return c
	}
	direct := goredis.NewClient(&goredis.Options{Addr: tp.Addr, TLSConfig: right, MaxRetries: -1})
	defer direct.Close()

	good := newClient(right)
	owners := fixtures.ByOwner(good, fixtures.Keys(200))
	for _, k := range append(owners[0][:20], owners[1][:20]...) {
		if err := good.Set(ctx, k, "v:"+k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if v, err := good.Get(ctx, k).Result(); err != nil || v != "v:"+k {
			t.Fatalf("GET %s = %q, %v", k, v, err)
		}
	}
	if n, err := direct.DBSize(ctx).Result(); err != nil || n != 20 {
		t.Fatalf("the TLS server holds %d keys (%v), want 20", n, err)
	}

	before := fixtures.ReadCounts(t, direct)
	bad := newClient(wrongCA.clientConfig())
	const tries = 5
	for _, k := range owners[0][:tries] {
		err := bad.Get(ctx, k).Err()
		fixtures.WantShardError(t, "GET "+k+" with a wrong CA", err, 0, tp.Addr)
		var verify *tls.CertificateVerificationError
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &verify) || !errors.As(err, &unknown) ||
			verify.UnverifiedCertificates[0].Subject.CommonName != "127.0.0.1" {
			t.Fatalf("GET %s with a wrong CA: %v, want the server certificate's unknown authority", k, err)
		}
	}
	k := owners[1][0]
	if v, err := bad.Get(ctx, k).Result(); err != nil || v != "v:"+k {
		t.Fatalf("GET %s on the plaintext shard = %q, %v", k, v, err)
	}
	if st := bad.Stats(); st[0] != (shardedclient.ShardStats{Name: "tls", Addr: tp.Addr, Requests: tries, Errors: tries}) ||
		st[1] != (shardedclient.ShardStats{Name: "plain", Addr: plain.Addr, Requests: 1}) {
		t.Fatalf("stats %+v", st)
	}

	// The server executed our INFO (an INFO counts once it has answered) and
	// nothing else; no connection of the wrong CA's client got past the TLS
	// handshake (Redis counts a connection once it has), and its log shows
	// each try's handshake ended by the client's alert (a plaintext command
	// would end it with "wrong version number").
	want := maps.Clone(before.Calls)
	want["info"]++
	if after := fixtures.ReadCounts(t, direct); !maps.Equal(after.Calls, want) || after.Conns != before.Conns || after.Errors != before.Errors {
		t.Fatalf("counters of the TLS server moved from\n%+v\nto\n%+v", before, after)
	}
	// The server logs a refused handshake a moment after the client gave up.
	var refused []string
	fixtures.Poll(t, 5*time.Second, "the server logs every refused handshake", func() error {
		log, err := os.ReadFile(filepath.Join(tp.Dir, "redis.log"))
		if err != nil {
			return err
		}
		refused = refused[:0]
		for line := range strings.Lines(string(log)) {
			if strings.Contains(line, "Error accepting a client connection") {
				refused = append(refused, strings.TrimSpace(line))
			}
		}
		if len(refused) < tries {
			return fmt.Errorf("%d refused connections in the server log", len(refused))
		}
		return nil
	})
	if len(refused) != tries {
		t.Fatalf("%d refused connections in the server log, want %d:\n%s", len(refused), tries, strings.Join(refused, "\n"))
	}
	for _, line := range refused {
		if !strings.Contains(line, "SSL routines::sslv3 alert bad certificate") { // Redis may append "(conn: fd=N)"
			t.Fatalf("refused connection %q, want the client's bad certificate alert", line)
		}
	}
}
