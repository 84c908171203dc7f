package redissync

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestThrottleBurstIsRate: after an idle spell, a Throttle lets Rate
// flows in at once, whatever the digits of Period/Rate. Its interval,
// given to Redis to the ns, rounded to the nearest: for Rate 60 per
// second (16666.667 µs, rounded up) the slack of Period - interval held
// 58.99999... intervals, and the burst was 59.
func TestThrottleBurstIsRate(t *testing.T) {
	c, _ := newClient(t, sharedRedis(t), Options{})
	for _, tc := range []struct {
		rate   int
		period time.Duration
	}{
		{60, time.Second}, {600, time.Second}, {6000, time.Second}, {600, 10 * time.Second},
		{6, time.Millisecond}, {3, time.Second}, {7, time.Second}, {1000, time.Minute},
		{10000, time.Microsecond}, {1, time.Nanosecond},
	} {
		th := c.NewThrottle(fmt.Sprintf("burst%d/%v", tc.rate, tc.period), ThrottleOptions{Rate: tc.rate, Period: tc.period})
		// One call for more than Rate on the idle key: the script admits
		// what the burst allows, as one round trip of Rate+1 flows would.
		res, err := c.call(gcraScript, th.keys, th.interval, th.slack, tc.rate+1, 1, th.keep)
		if err != nil {
			t.Fatal(err)
		}
		if n := toInt(res[0]); n != int64(tc.rate) {
			t.Errorf("Rate %d per %v: %d admitted at once after an idle spell, want %d (interval %s µs, slack %s µs)",
				tc.rate, tc.period, n, tc.rate, th.interval, th.slack)
		}
	}
}

// TestThrottleSpacesEntriesByItsInterval: each entry moves the time of
// the next on by the interval, to the ns, however far Redis's clock is
// from its epoch. In a double, a µs count of that clock keeps quarters of
// a µs only: an interval of 333.334 µs moved it on by 333.25, so that
// entries came 0.025% faster than Rate per Period.
func TestThrottleSpacesEntriesByItsInterval(t *testing.T) {
	c, rdb := newClient(t, sharedRedis(t), Options{})
	th := c.NewThrottle("spacing", ThrottleOptions{Rate: 3000, Period: time.Second})
	if th.interval != "333.334" {
		t.Fatalf("interval %s µs, want 333.334", th.interval)
	}
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Ahead of Redis's clock by 0.9 s, under the slack (2999 intervals):
	// one entry may enter at each call.
	base := now.UnixMicro() + 900_000
	if err := rdb.Set(ctx, th.keys[0], fmt.Sprintf("%d.500", base), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for call := 1; call <= 3; call++ {
		res, err := c.call(gcraScript, th.keys, th.interval, th.slack, 1, call, th.keep)
		if err != nil {
			t.Fatal(err)
		}
		tat, err := rdb.Get(ctx, th.keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d admitted, TAT +%s", toInt(res[0]), tatSince(t, tat, base)))
	}
	want := []string{"1 admitted, TAT +333.834", "1 admitted, TAT +667.168", "1 admitted, TAT +1000.502"}
	if !slices.Equal(got, want) {
		t.Errorf("calls: %q, want %q", got, want)
	}
}

// tatSince returns tat, a TAT the script wrote ("µs.ns"), less base µs,
// as "µs.ns".
func tatSince(t *testing.T, tat string, base int64) string {
	t.Helper()
	whole, frac, ok := strings.Cut(tat, ".")
	us, err := strconv.ParseInt(whole, 10, 64)
	if !ok || err != nil || len(frac) != 3 {
		t.Fatalf("TAT %q is not µs.ns", tat)
	}
	return fmt.Sprintf("%d.%s", us-base, frac)
}
