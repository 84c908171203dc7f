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
	e.put(m)
	e.put(len(p.Steps) % 5)
	for _, n := range p.Steps {
		e.node(n)
	}
	return e.b
}

type encoder struct{ b []byte }

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
	e.put(int(n.Kind))
	switch n.Kind {
	case KStep:
		e.step(n)
	case KParallel:
		b := len(n.Subs) & 3
		if n.Handler != nil {
			b |= 4
		}
		e.put(b)
		for _, s := range n.Subs {
			e.node(s)
		}
		if n.Handler != nil {
			e.handler(n.Handler)
		}
	case KLoop, KRepeat:
		e.put(labelCode(n.Label) | n.Count%4<<2 | len(n.Subs)%3<<4)
		for _, s := range n.Subs {
			e.node(s)
		}
	case KSync:
		e.put(n.Mutex & 1)
		e.step(n.Body)
	case KSuccessStep:
		e.put(len(n.Args) % 3)
	}
}

func (e *encoder) step(n *Node) {
	f := int(n.End)<<5 | len(n.Subs)%4<<3
	if n.Timeout > 0 {
		f |= 1
	}
	if n.Cancel {
		f |= 2
	}
	if n.Handler != nil {
		f |= 4
	}
	e.put(f)
	if n.Timeout > 0 {
		e.put(max(n.Timeout/10-1, 0) % 6)
	}
	switch n.End {
	case ESuccess:
		e.put(len(n.Args) % 3)
	case EError, EExternalErr:
		b := errCode(n.Code)
		if n.Info != "" {
			b |= 4
		}
		b |= n.At / 10 % 6 << 3
		e.put(b)
	case EBreak, EContinue:
		e.put(labelCode(n.Label))
	case EExternal:
		e.put(n.At/10%6 | len(n.Args)%3<<3)
	}
	for _, s := range n.Subs {
		e.node(s)
	}
	if n.Handler != nil {
		e.handler(n.Handler)
	}
}

func (e *encoder) handler(h *Handler) {
	b := int(h.Action) & 3
	switch h.Action {
	case HRethrow:
		b |= errCode(h.Code) << 2
		if h.Info != "" {
			b |= 16
		}
	case HAdd:
		b |= (len(h.Steps) - 1) % 2 << 2
	}
	e.put(b)
	switch h.Action {
	case HRecover:
		e.put(len(h.Args) % 3)
	case HAdd:
		for _, s := range h.Steps {
			e.node(s)
		}
	}
}
