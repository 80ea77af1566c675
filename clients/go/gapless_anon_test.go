package leaf

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// The settlement secret is HMAC-SHA256 of "tag\x00key" under the settlement key, in hex: the
// Rust client's derivation, so a number one reserves the other confirms. The vector was
// computed apart from this client (Python's hmac module).
func TestTheSettlementSecretIsTheRustClientsDerivation(t *testing.T) {
	var key [32]byte
	for i := range key {
		key[i] = byte(i)
	}
	c, err := New([]string{"http://127.0.0.1:1"}, WithSettlementKey(key))
	if err != nil {
		t.Fatal(err)
	}
	got := c.secret("inv", "order-1")
	want := "acf4977c6b20e7e03a8939b24d4b3b8fbc4209b25e0d019fe2df2444e419cc4a"
	if got == nil || *got != want {
		t.Fatalf("secret %v, want %s", got, want)
	}
	admin, err := New([]string{"http://127.0.0.1:1"}, WithToken("a-token"), WithSettlementKey(key))
	if err != nil {
		t.Fatal(err)
	}
	if s := admin.secret("inv", "order-1"); s != nil {
		t.Fatal("a client with a token sends no settlement secret")
	}
}

// Without a token, on a node that lets anonymous callers take gapless numbers: the client that
// reserved a number confirms it; a client with another settlement key cannot.
func TestOnlyTheReserverSettlesAnAnonymousReservation(t *testing.T) {
	d := newDeployment(t, "http")
	port := freePort(t)
	args := []string{leafBin(t), "serve", "--data-dir", filepath.Join(d.dir, "node1"), "--http-addr", fmt.Sprintf("127.0.0.1:%d", port)}
	env := append(d.env(), "LEAF_AUTH__ANONYMOUS_GAPLESS=true")
	d.nodes[1] = &node{id: 1, port: port, args: args, env: env, log: filepath.Join(d.dir, "node1.log")}
	d.nodes[1].start(t)
	d.waitReady([]int{1}, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin, err := New(d.urls(), WithToken(d.token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTag(ctx, CreateTagRequest{Tag: "go-anon", Step: 1, Profile: "gapless"}); err != nil {
		t.Fatal(err)
	}
	var k1, k2 [32]byte
	cryptoRand(k1[:])
	cryptoRand(k2[:])
	reserver, err := New(d.urls(), WithSettlementKey(k1))
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(d.urls(), WithSettlementKey(k2))
	if err != nil {
		t.Fatal(err)
	}
	r, err := reserver.ReserveNumber(ctx, "go-anon", "order-1", 600)
	if err != nil || r.Number != 1 || r.State != StateReserved {
		t.Fatalf("reserve: %+v %v", r, err)
	}
	if _, err := other.ConfirmNumber(ctx, "go-anon", "order-1"); !errors.Is(err, CodeNumberConflict) {
		t.Fatalf("another settlement key confirmed the number: %v", err)
	}
	if _, err := other.VoidNumber(ctx, "go-anon", "order-1", "not mine"); !errors.Is(err, CodeNumberConflict) {
		t.Fatalf("another settlement key voided the number: %v", err)
	}
	// A retry of the reservation by its reserver gets the same number back.
	again, err := reserver.ReserveNumber(ctx, "go-anon", "order-1", 600)
	if err != nil || again.Number != 1 || !again.Replayed {
		t.Fatalf("the reserver's repeat: %+v %v", again, err)
	}
	conf, err := reserver.ConfirmNumber(ctx, "go-anon", "order-1")
	if err != nil || conf.Number != 1 || conf.State != StateConfirmed {
		t.Fatalf("the reserver's confirm: %+v %v", conf, err)
	}
}
