package leaf

import (
	"context"
	cryptorand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Real leaf nodes for the tests (as clients/python/tests/_harness.py starts them): one
// plaintext node, or a 3-node TLS cluster with certificates from `leaf certs bundle`. Ports are
// picked by binding port 0; data lives in t.TempDir(); every process is killed (SIGKILL) by
// t.Cleanup, also when the test fails, and a failed test prints the nodes' logs.

// repoRoot is <repo> (clients/go is two levels below it).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// leafBin is $LEAF_BIN, else <repo>/target/debug/leaf; the test fails (not skips) without it.
func leafBin(t testing.TB) string {
	path := os.Getenv("LEAF_BIN")
	if path == "" {
		path = filepath.Join(repoRoot(), "target", "debug", "leaf")
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("no leaf binary at %s: build it with `cargo build -p leaf-node --bin leaf` (or point LEAF_BIN at one)", path)
	}
	return path
}

var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// freePort is a loopback port never handed out before by this process.
func freePort(t testing.TB) int {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !given[port] {
			given[port] = true
			return port
		}
	}
}

// waitFor polls cond every 20 ms until it holds; fails the test after timeout.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// seeded returns a random source and prints its seed (LEAF_TEST_SEED repeats a run).
func seeded(t testing.TB) *rand.Rand {
	seed := time.Now().UnixNano()
	if s := os.Getenv("LEAF_TEST_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("random seed %d (LEAF_TEST_SEED=%d repeats it)", seed, seed)
	return rand.New(rand.NewSource(seed))
}

// node is one `leaf serve` process.
type node struct {
	id   int
	port int
	args []string
	env  []string
	log  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (n *node) start(t testing.TB) {
	out, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(n.args[0], n.args[1:]...)
	cmd.Env = n.env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("starting node %d: %v", n.id, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
}

func (n *node) alive() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process this harness started, and reaps it.
func (n *node) kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

func (n *node) logTail(lines int) string {
	data, err := os.ReadFile(n.log)
	if err != nil {
		return "(no log)"
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// deployment is nodes sharing one temp dir, token and (for a cluster) CA.
type deployment struct {
	t      testing.TB
	dir    string
	scheme string
	token  string
	ca     string
	nodes  map[int]*node
	http   *http.Client
}

func newDeployment(t testing.TB, scheme string) *deployment {
	rnd := make([]byte, 32)
	cryptoRand(rnd)
	d := &deployment{t: t, dir: t.TempDir(), scheme: scheme, token: hex.EncodeToString(rnd[:16]), nodes: map[int]*node{}}
	t.Cleanup(func() {
		for _, n := range d.nodes {
			n.kill()
		}
		if t.Failed() {
			t.Log(d.logs())
		}
		if d.http != nil {
			d.http.CloseIdleConnections()
		}
	})
	return d
}

func (d *deployment) env() []string {
	secret := make([]byte, 16)
	cryptoRand(secret)
	return append(os.Environ(), "LEAF_ADMIN_TOKEN="+d.token, "LEAF_CLUSTER_SECRET="+hex.EncodeToString(secret),
		"RUST_LOG=info,openraft=warn")
}

func (d *deployment) logs() string {
	var b strings.Builder
	for i := 1; i <= len(d.nodes); i++ {
		if n := d.nodes[i]; n != nil {
			fmt.Fprintf(&b, "===== node %d (%s) =====\n%s\n", i, n.log, n.logTail(60))
		}
	}
	return b.String()
}

func (d *deployment) url(id int) string {
	return fmt.Sprintf("%s://127.0.0.1:%d", d.scheme, d.nodes[id].port)
}

func (d *deployment) urls() []string {
	var out []string
	for i := 1; i <= len(d.nodes); i++ {
		out = append(out, d.url(i))
	}
	return out
}

// probe is an HTTP client trusting the deployment's CA (for health checks).
func (d *deployment) probe() *http.Client {
	if d.http == nil {
		cfg := &tls.Config{}
		if d.ca != "" {
			pool := x509.NewCertPool()
			pem, err := os.ReadFile(d.ca)
			if err != nil {
				d.t.Fatal(err)
			}
			pool.AppendCertsFromPEM(pem)
			cfg.RootCAs = pool
		}
		d.http = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, Proxy: nil}}
	}
	return d.http
}

// health is a node's /health when it answers 200, else nil.
func (d *deployment) health(id int) map[string]interface{} {
	resp, err := d.probe().Get(d.url(id) + "/health")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var h map[string]interface{}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&h) != nil {
		return nil
	}
	return h
}

func (d *deployment) waitReady(ids []int, timeout time.Duration) {
	d.t.Helper()
	waitFor(d.t, fmt.Sprintf("nodes %v ready", ids), timeout, func() bool {
		for _, i := range ids {
			if !d.nodes[i].alive() {
				d.t.Fatalf("node %d exited:\n%s", i, d.nodes[i].logTail(60))
			}
		}
		for _, i := range ids {
			if d.health(i) == nil {
				return false
			}
		}
		return true
	})
}

// leaderAmong is the leader every node of ids agrees on (and is one of ids), or 0.
func (d *deployment) leaderAmong(ids []int) int {
	seen := map[float64]bool{}
	for _, i := range ids {
		h := d.health(i)
		if h == nil {
			return 0
		}
		l, _ := h["leader_id"].(float64)
		seen[l] = true
	}
	if len(seen) != 1 {
		return 0
	}
	for l := range seen {
		for _, i := range ids {
			if float64(i) == l {
				return i
			}
		}
	}
	return 0
}

func (d *deployment) waitLeaderAmong(ids []int, timeout time.Duration) int {
	d.t.Helper()
	var leader int
	waitFor(d.t, fmt.Sprintf("a leader among %v", ids), timeout, func() bool {
		leader = d.leaderAmong(ids)
		return leader != 0
	})
	return leader
}

// startSingle starts one plaintext node with an admin token; it creates `leaf-segment-test`.
func startSingle(t testing.TB) *deployment {
	bin := leafBin(t)
	d := newDeployment(t, "http")
	port := freePort(t)
	args := []string{bin, "serve", "--data-dir", filepath.Join(d.dir, "node1"), "--http-addr", fmt.Sprintf("127.0.0.1:%d", port)}
	d.nodes[1] = &node{id: 1, port: port, args: args, env: d.env(), log: filepath.Join(d.dir, "node1.log")}
	d.nodes[1].start(t)
	d.waitReady([]int{1}, 60*time.Second)
	return d
}

// startCluster starts n TLS nodes with certificates from `leaf certs bundle`, as
// deploy/local-cluster.sh does, and waits for a leader.
func startCluster(t testing.TB, n int) *deployment {
	bin := leafBin(t)
	d := newDeployment(t, "https")
	tlsDir := filepath.Join(d.dir, "tls")
	certs := []string{"certs", "bundle", "--dir", tlsDir}
	for i := 1; i <= n; i++ {
		certs = append(certs, "--node", fmt.Sprintf("%d=127.0.0.1,localhost", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, certs...).CombinedOutput(); err != nil {
		t.Fatalf("leaf certs bundle: %v\n%s", err, out)
	}
	d.ca = filepath.Join(tlsDir, "ca.pem")
	ports := map[int]int{}
	var peers []string
	for i := 1; i <= n; i++ {
		ports[i] = freePort(t)
		peers = append(peers, fmt.Sprintf("%d=127.0.0.1:%d", i, ports[i]))
	}
	env := d.env()
	for i := 1; i <= n; i++ {
		args := []string{bin, "serve", "--node-id", fmt.Sprint(i), "--http-addr", fmt.Sprintf("127.0.0.1:%d", ports[i]),
			"--data-dir", filepath.Join(d.dir, fmt.Sprintf("node%d", i)), "--peers", strings.Join(peers, ","),
			"--tls-cert", filepath.Join(tlsDir, fmt.Sprintf("node-%d.pem", i)),
			"--tls-key", filepath.Join(tlsDir, fmt.Sprintf("node-%d-key.pem", i)),
			"--tls-ca", d.ca}
		d.nodes[i] = &node{id: i, port: ports[i], args: args, env: env, log: filepath.Join(d.dir, fmt.Sprintf("node%d.log", i))}
	}
	for i := 1; i <= n; i++ {
		d.nodes[i].start(t)
	}
	ids := make([]int, 0, n)
	for i := 1; i <= n; i++ {
		ids = append(ids, i)
	}
	d.waitReady(ids, 90*time.Second)
	d.waitLeaderAmong(ids, 60*time.Second)
	return d
}

func cryptoRand(b []byte) {
	if _, err := cryptorand.Read(b); err != nil {
		panic(err)
	}
}
