package redissync

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestNewRefusesAnEmptyHashTagPrefix: a Prefix whose first "{" is
// followed at once by "}" is refused. Redis Cluster hashes the whole key
// when its first tag is empty, so the tag of the Syncer's name after such
// a prefix counted for nothing, and one Syncer's keys, which its scripts
// take together, went to different nodes. Other braces keep a Syncer's
// keys in one slot, and are taken.
func TestNewRefusesAnEmptyHashTagPrefix(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: sharedRedis(t)})
	defer rdb.Close()
	for _, tc := range []struct{ prefix, err string }{
		{"{}", `redissync: New: Prefix "{}" has an empty hash tag "{}", which would spread a Syncer's keys over the nodes of a Redis Cluster`},
		{"app{}", `redissync: New: Prefix "app{}" has an empty hash tag "{}", which would spread a Syncer's keys over the nodes of a Redis Cluster`},
		{"a}{}{b}", `redissync: New: Prefix "a}{}{b}" has an empty hash tag "{}", which would spread a Syncer's keys over the nodes of a Redis Cluster`},
		{"{app}", ""}, {"{app}{}", ""}, {"app{", ""}, {"app}", ""}, {"{", ""},
	} {
		c, err := New(context.Background(), rdb, Options{Prefix: tc.prefix})
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			c.Close()
		}
		if got != tc.err {
			t.Errorf("Prefix %q: error %q, want %q", tc.prefix, got, tc.err)
		}
	}
}

// TestSyncerKeysShareASlot: every key of one Syncer is in one Redis
// Cluster slot, whatever braces the Prefix New takes has: they have one
// hash tag, as Redis Cluster reads one.
func TestSyncerKeysShareASlot(t *testing.T) {
	for _, prefix := range []string{"app", "{app}", "{app}{}", "app{", "{", "app}", "a{b}c"} {
		c := &Client{opts: Options{Prefix: prefix}}
		tags := map[string]bool{}
		for _, part := range []string{"holders", "fence", "fence:server", "gone", "call:x:1", "tat"} {
			tags[hashTag(c.key("db", part))] = true
		}
		if len(tags) != 1 {
			t.Errorf("Prefix %q: the keys of Syncer \"db\" have the hash tags %v, want one", prefix, tags)
		}
	}
}

// hashTag returns what Redis Cluster hashes of key: the text between its
// first "{" and the next "}" if that is not empty, else the whole key.
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j == i+1 {
					return key
				}
				return key[i+1 : j]
			}
		}
		return key
	}
	return key
}
