package flowfuzz

// Encode returns bytes that [Decode] turns into p, up to the IDs (Decode
// numbers nodes in order) and the values of args (Decode derives them from
// the IDs; only their number is kept). It writes the seed corpus. Values out
// of what Decode can produce are clamped.
func Encode(p *Program) []byte {
	var e encoder
	switch c := p.CancelAt; {
	case c <= 0 || c >= SafetyCancel:
		e.put(0)
	case c/5%50 == 0:
		e.put(50)
	default:
		e.put(c / 5 % 50)
	}
	m := 0
	if len(p.Mutexes) > 0 && p.Mutexes[0] > 1 {
		m |= 1
	}
	if len(p.Mutexes) > 1 && p.Mutexes[1] > 1 {
		m |= 2
	}
	for i := range 2 {
		if q := p.MutexQueue(i); q >= 0 {
			m |= min(q+1, 3) << (2 + 2*i)
		}
	}
	if p.CancelFrom > 0 {
		m |= 0x40
	}
	e.ext = p.Ext || p.Ctx != CtxNone || p.Awaits || p.Hooks
	if e.ext {
		m |= 0x80
	}
	e.put(m)
	if p.CancelFrom > 0 {
		c := (p.CancelFrom - 1) % maxNodes
		if p.CancelInCancel {
			c += maxNodes
		}
		e.put(c)
	}
	if e.ext {
		x := int(p.Ctx)&3 | min(p.CtxAt/5, 15)<<3
		if p.Hooks {
			x |= 0x80
		}
		if p.Helping {
			x |= 4
		}
		e.put(x)
		e.awaits = true
	}
	e.p = p
	e.put(len(p.Steps) % 5)
	for _, n := range p.Steps {
		e.node(n)
	}
	return e.b
}

type encoder struct {
	b        []byte
	p        *Program
	throttle bool // its parameters are written
	limiter  bool // its parameters are written
	keyed    bool // the KeyedMutex's parameters are written
	ext      bool // the extensions (Program.Ext)
	awaits   bool // a plain step that waits has a byte that says it is no KAwait
	held     int  // the sections (of a Mutex or a Limiter) being written: no KAwait in them under Run
	items    int  // the items of ForEachLimits being written: no KAwait in them under Run either
}

func (e *encoder) put(v int) { e.b = append(e.b, byte(v)) }

func labelCode(l string) int {
	switch l {
	case "A":
		return 1
	case "B":
		return 2
	}
	return 0
}

func errCode(c string) int {
	if len(c) == 2 && c[0] == 'E' && c[1] >= '0' && c[1] <= '2' {
		return int(c[1] - '0')
	}
	return 0
}

func (e *encoder) node(n *Node) {
	if n.Kind == KForEach {
		e.put(int(KRepeat))
		b := labelCode(n.Label) | n.Count%4<<2 | len(n.Subs)%3<<4 | 0x40
		if n.Map {
			b = b&^0x40 | 0x80
		}
		e.put(b)
		c := 0
		switch n.End {
		case EBreak:
			c = 1
		case EContinue:
			c = 2
		}
		if n.Seq && !n.Map {
			c |= 16
			if c == 16 && (n.SeqPanic || n.SeqGoexit) {
				c |= 3 // the sequence's fault, where no Break or Continue is
				if n.SeqGoexit {
					c |= 32
				}
			}
		}
		e.put(c | n.At%4<<2)
		for _, s := range n.Subs {
			e.node(s)
		}
		return
	}
	if n.Kind == KRetry {
		e.retry(n)
		return
	}
	if n.Kind == KForEachLimit {
		e.limit(n)
		return
	}
	if n.Kind == KAwait {
		e.put(int(KStep))
		e.await(n)
		return
	}
	if n.Kind == KRace {
		e.race(n)
		return
	}
	if n.Kind == KSettle {
		e.put(int(KParallel))
	} else {
		e.put(int(n.Kind))
	}
	switch n.Kind {
	case KStep:
		e.stepOf(n, e.awaits && (e.p.Ctx == CtxNone || e.held == 0 && e.items == 0))
	case KParallel, KSettle:
		b := len(n.Subs) & 3
		if n.Handler != nil && n.Kind == KParallel {
			b |= 4
		}
		if n.Kind == KSettle {
			b |= 8
		}
		e.put(b)
		for _, s := range n.Subs {
			e.node(s)
		}
		if n.Handler != nil && n.Kind == KParallel {
			e.handler(n.Handler)
		}
	case KLoop, KRepeat:
		e.put(labelCode(n.Label) | n.Count%4<<2 | len(n.Subs)%3<<4)
		for _, s := range n.Subs {
			e.node(s)
		}
	case KSync:
		if n.Mutex == LimiterGate {
			e.put(6 | 8) // the Limiter as given, even where it may deadlock
			if !e.limiter {
				e.limiter = true
				l := Limiter{Concurrent: 1, Rate: 1, Period: 10}
				if e.p.Limiter != nil {
					l = *e.p.Limiter
				}
				e.put(l.Concurrent&3 | min(l.MaxQueue+1, 3)&3<<2 | l.Rate&3<<4 | min(l.Burst+1, 3)&3<<6)
				e.put(max(l.Period/10-1, 0) % 4)
			}
		} else if n.Mutex == ThrottleGate {
			e.put(2)
			if !e.throttle {
				e.throttle = true
				t := Throttle{N: 1, Period: 10, Queue: -1}
				if e.p.Throttle != nil {
					t = *e.p.Throttle
				}
				e.put((t.N-1)&1 | max(t.Period/10-1, 0)%4<<1 | min(t.Queue+1, 3)<<3)
			}
		} else if IsKeyed(n.Mutex) {
			// The key as given, even where it may deadlock.
			e.put(0xc0 | (n.Mutex-KeyedGate)%KeyedKeys<<3 | 4)
			if !e.keyed {
				e.keyed = true
				k := Keyed{Max: 1, MaxQueue: -1}
				if e.p.Keyed != nil {
					k = *e.p.Keyed
				}
				e.put((k.Max-1)&1 | min(k.MaxQueue+1, 3)<<1)
			}
		} else {
			e.put(n.Mutex&1 | 4) // the Mutex as given, even where it may deadlock
		}
		if n.Mutex != ThrottleGate {
			e.held++
			defer func() { e.held-- }()
		}
		e.step(n.Body)
	case KSuccessStep:
		e.put(len(n.Args) % 3)
	}
}

func (e *encoder) retry(n *Node) {
	rs := n.Retry
	if rs == nil {
		rs = &RetrySpec{Backoff: -1}
	}
	e.put(int(KLoop))
	e.put(labelCode(n.Label) | max(n.Count-1, 0)%4<<2 | len(n.Subs)%3<<4 | 0x40)
	r := rs.FailUntil % 4 << 3
	switch rs.Fail {
	case EWait:
		r |= 2
	case EPanic:
		r |= 3
	case EBreak:
		r |= 4 | labelCode(rs.Label)<<5
	case EContinue:
		r |= 5 | labelCode(rs.Label)<<5
	default:
		for i, c := range RetryCodes {
			if c == rs.Code {
				r |= i << 5
			}
		}
	}
	if rs.Retryable {
		r |= 0x80
	}
	e.put(r)
	t := (min(rs.Backoff, 20)/10 + 1) & 3
	if rs.Backoff < 0 {
		t = 0
	}
	t |= rs.Timeout / 10 % 6 << 2
	t |= len(n.Args) % 3 << 5
	if rs.Delay && rs.Backoff >= 0 {
		t |= 0x80
	}
	e.put(t)
	for _, s := range n.Subs {
		e.node(s)
	}
}

// race writes the KRace n as the KParallel it is made from: 1 to 4
// branches (clamped), First or Quorum's k.
func (e *encoder) race(n *Node) {
	e.put(int(KParallel))
	subs := n.Subs[:min(len(n.Subs), 4)]
	if len(subs) == 0 {
		subs = []*Node{{Kind: KStep}}
	}
	b := 0x80 | (len(subs)-1)&3
	if n.Need == 0 {
		b |= 4
	}
	e.put(b)
	if n.Need != 0 {
		e.put((n.Need - 1) % len(subs))
	}
	for _, s := range subs {
		e.node(s)
	}
}

// limit writes the KForEachLimit n as the KParallel it is made from.
func (e *encoder) limit(n *Node) {
	e.put(int(KParallel))
	b := len(n.Subs)&3 | 0xc0
	if n.Handler != nil {
		b |= 4
	}
	e.put(b)
	e.put(max(n.Limit-1, 0)&3 | n.Count%9<<2)
	c := 0
	switch n.End {
	case EBreak:
		c = 1
	case EContinue:
		c = 2
	case ESuccess:
		c = 3
	}
	label := labelCode(n.Label)
	if n.SeqPanic || n.SeqGoexit {
		c |= 0x80
	}
	if n.SeqGoexit {
		label = 3 // "", which makes the panic a Goexit
	}
	e.put(c | n.At%8<<2 | label<<5)
	e.items++
	for _, s := range n.Subs {
		e.node(s)
	}
	e.items--
	if n.Handler != nil {
		e.handler(n.Handler)
	}
}

func (e *encoder) step(n *Node) { e.stepOf(n, false) }

// await writes the KAwait n as the step that waits it is made from.
func (e *encoder) await(n *Node) {
	if n.Await == AwaitChan || n.Await == AwaitResult {
		e.channel(n)
		return
	}
	end, variant := n.End, 0
	switch {
	case end == EPanic:
		end, variant = EExternalErr, 2
	case end == EGoexit:
		end, variant = EExternalErr, 3
	case end == EExternalErr && n.Code == "Timeout":
		variant = 1
	}
	f := int(end) << 5
	if n.Handler != nil {
		f |= 4
	}
	e.put(f)
	switch end {
	case EExternal:
		e.put(len(n.Args) % 3 << 3)
	case EExternalErr:
		b := errCode(n.Code)
		if n.Info != "" {
			b |= 4
		}
		e.put(b)
	}
	e.put(int(n.Await) + 1 | variant<<2 | n.At/10%6<<4)
	if n.Handler != nil {
		e.handler(n.Handler)
	}
}

// channel writes the AwaitChan or AwaitResult n as a step that waits.
func (e *encoder) channel(n *Node) {
	f := int(EWait) << 5
	if n.Handler != nil {
		f |= 4
	}
	e.put(f)
	a := int(AwaitFlow) + 1 | 4 | n.At/10%6<<4
	if n.Await == AwaitResult {
		a = a&^4 | 8
	}
	e.put(a)
	v := 0
	switch {
	case n.NilChan:
		v = 64
	case n.End == EWait:
		v = 32
	case n.Closed:
		v = 3
	case n.End == EExternal && n.Await == AwaitResult:
		v = len(n.Args) % 3 << 2
	case n.End == EExternalErr && n.Code == "Timeout":
		v = 2
	case n.End == EExternalErr && n.Code == "InternalError":
		v = 2 | 16
	case n.End == EExternalErr:
		v = 1 | errCode(n.Code)<<2
		if n.Info != "" {
			v |= 16
		}
	}
	if n.Ready {
		v |= 128
	}
	e.put(v)
	if n.Handler != nil {
		e.handler(n.Handler)
	}
}

// stepOf writes the step n; awaitable: a step that waits says it is no
// KAwait.
func (e *encoder) stepOf(n *Node, awaitable bool) {
	end := n.End
	switch end {
	case EPanic, EGoexit, EPanicEvil, EFail, EExternalFail:
		end = EError
	case EParent:
		end = EBreak
	case EParentBreak:
		end = EContinue
	}
	f := int(end)<<5 | len(n.Subs)%4<<3
	if n.HasTimeout() {
		f |= 1
	}
	if n.Cancel {
		f |= 2
	}
	if n.Handler != nil {
		f |= 4
	}
	e.put(f)
	if n.HasTimeout() {
		t := max(n.Timeout/10-1, 0) % 6
		if n.ZeroTimeout {
			t = 7
		}
		if n.Timeout2 > 0 {
			t |= 8 | max(n.Timeout2/10-1, 0)%6<<4
		}
		if n.CancelPanic || n.CancelGoexit {
			t |= 0x80
		}
		if n.CancelGoexit && n.Timeout2 == 0 {
			t |= 0x40
		}
		e.put(t)
	}
	// Without a timeout, the byte of the end carries CancelPanic, where it
	// has room for it, and CancelGoexit, also where the timeout's byte has
	// none (a second timeout).
	cp := 0
	if (n.CancelPanic || n.CancelGoexit) && !n.HasTimeout() {
		cp = 0x80
	}
	if n.CancelGoexit && (!n.HasTimeout() || n.Timeout2 > 0) {
		cp = 0xc0
	}
	switch n.End {
	case EPanic:
		e.put(8 | cp)
	case EGoexit:
		e.put(8 | 16 | cp)
	case EPanicEvil:
		e.put(8 | 32 | cp)
	case EParent:
		e.put(4 | cp)
	case EParentBreak:
		e.put(labelCode(n.Label) | 4 | cp)
	case ESuccess:
		e.put(len(n.Args) % 3)
	case EError, EExternalErr:
		b := errCode(n.Code)
		if n.Info != "" {
			b |= 4
		}
		b |= n.At / 10 % 6 << 3
		if n.End == EError {
			b |= cp
		}
		e.put(b)
	case EBreak, EContinue:
		e.put(labelCode(n.Label) | cp)
	case EExternal:
		e.put(n.At/10%6 | len(n.Args)%3<<3)
	case EFail, EExternalFail:
		e.put(16 | errCode(n.Code) | cp)
		f := int(n.Fail) & 3
		if n.End == EExternalFail {
			f |= 4 | n.At/10%6<<3
		}
		e.put(f)
	}
	if awaitable && (n.End == EExternal || n.End == EExternalErr || n.End == EWait) {
		e.put(0)
	}
	for _, s := range n.Subs {
		e.node(s)
	}
	if n.Handler != nil {
		e.handler(n.Handler)
	}
}

func (e *encoder) handler(h *Handler) {
	switch h.Action {
	case HPanic:
		e.put(32)
		return
	case HGoexit:
		e.put(32 | 128)
		return
	case HWait:
		e.put(32 | 64)
		b := h.At / 10 % 6 << 2
		switch h.Done {
		case EExternal:
			b |= len(h.Args) % 3 << 6
		case EExternalErr:
			b |= 1 | errCode(h.Code)<<6
		default:
			b |= 2
		}
		if h.Timeout > 0 {
			b |= 32
		}
		e.put(b)
		if h.Timeout > 0 {
			e.put(max(h.Timeout/10-1, 0) % 6)
		}
		return
	}
	if h.Action == HFail {
		e.put(128 | errCode(h.Code)<<2)
		e.put(int(h.Fail) & 3)
		return
	}
	b := int(h.Action) & 3
	switch h.Action {
	case HRethrow:
		b |= errCode(h.Code) << 2
		if h.Info != "" {
			b |= 16
		}
	case HAdd:
		b |= (len(h.Steps) - 1) % 2 << 2
		if e.ext && h.Timeout > 0 {
			b |= 8
		}
		if e.ext && h.Cancel {
			b |= 16
		}
	}
	e.put(b)
	switch h.Action {
	case HRecover:
		e.put(len(h.Args) % 3)
	case HAdd:
		if e.ext && h.Timeout > 0 {
			e.put(max(h.Timeout/10-1, 0) % 6)
		}
		for _, s := range h.Steps {
			e.node(s)
		}
	}
}
