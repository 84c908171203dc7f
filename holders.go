package asyncsteps

// smallHolders is the largest number of slots for which a Mutex keeps its
// holders in a list: scanning that many keys costs less than hashing one.
const smallHolders = 16

// holderSet counts, per holder (a flow or parallel branch, see owner), the
// entries a Mutex has admitted and not taken back. A Mutex of at most
// smallHolders slots keeps them in a list, a larger one in a map; the
// zero value is an empty list. Guarded by the Mutex's mu.
type holderSet struct {
	list  []holderCount
	byKey map[*frame]int
}

type holderCount struct {
	key *frame
	n   int
}

// len is the number of holders.
func (h *holderSet) len() int {
	if h.byKey != nil {
		return len(h.byKey)
	}
	return len(h.list)
}

// enter counts one more entry of key if key holds the Mutex already (it
// enters again) or fewer than slots holders do; it reports whether it did.
func (h *holderSet) enter(key *frame, slots int) bool {
	if h.byKey == nil && slots > smallHolders {
		h.byKey = make(map[*frame]int)
	}
	if h.byKey != nil {
		n := h.byKey[key]
		if n == 0 && len(h.byKey) >= slots {
			return false
		}
		h.byKey[key] = n + 1
		return true
	}
	for i := range h.list {
		if h.list[i].key == key {
			h.list[i].n++
			return true
		}
	}
	if len(h.list) >= slots {
		return false
	}
	h.list = append(h.list, holderCount{key: key, n: 1})
	return true
}

// addNew counts the first entry of key, which holds nothing, without a
// scan: a waiter that the Mutex admits from its queue (its flow or branch
// is stopped at the step that waits, and did not hold the Mutex when it
// queued, or it would have entered again at once), or a key just made.
func (h *holderSet) addNew(key *frame) {
	if h.byKey != nil {
		h.byKey[key] = 1
		return
	}
	h.list = append(h.list, holderCount{key: key, n: 1})
}

// count returns the entries key holds.
func (h *holderSet) count(key *frame) int {
	if h.byKey != nil {
		return h.byKey[key]
	}
	for _, c := range h.list {
		if c.key == key {
			return c.n
		}
	}
	return 0
}

// drop takes one entry of key back and returns how many it still holds;
// a holder left with none is no longer one.
func (h *holderSet) drop(key *frame) int {
	if h.byKey != nil {
		n := h.byKey[key] - 1
		if n > 0 {
			h.byKey[key] = n
		} else {
			delete(h.byKey, key)
		}
		return n
	}
	for i := range h.list {
		if h.list[i].key != key {
			continue
		}
		h.list[i].n--
		n := h.list[i].n
		if n == 0 {
			last := len(h.list) - 1
			h.list[i] = h.list[last]
			h.list[last] = holderCount{} // let the frame go
			h.list = h.list[:last]
		}
		return n
	}
	return 0
}

// all calls f with each holder until it returns false.
func (h *holderSet) all(f func(key *frame) bool) {
	if h.byKey != nil {
		for key := range h.byKey {
			if !f(key) {
				return
			}
		}
		return
	}
	for _, c := range h.list {
		if !f(c.key) {
			return
		}
	}
}
