package egress

// pickBuffer is how many usable instances Pick considers without
// allocating; a larger set costs one allocation per pick.
const pickBuffer = 64

// Pick chooses the instance for one attempt and counts it outstanding until
// its [Instance.Done]: among the usable instances, two drawn at random, and
// of those the one with fewer outstanding attempts (power of two choices).
//
// usable, when not nil, says whether an instance may be chosen (its breaker
// lets a call through); tried are the instances the call's earlier attempts
// went to, chosen again only when every usable instance was tried, so a
// retry goes to another instance whenever there is one. Pick returns nil
// when no instance is usable: the upstream is unavailable.
//
// Two random choices and the less loaded of them, rather than the least
// loaded of all: every caller reading the same counts would send its next
// call to the same instance, while two random choices spread a burst and
// still keep load off a slow instance, whose attempts pile up (Mitzenmacher's
// "power of two choices"). docs/http.md says why outstanding attempts and not
// a latency average.
func (s *Instances) Pick(tried []*Instance, usable func(*Instance) bool) *Instance {
	var buf [pickBuffer]*Instance
	cands := buf[:0]
	fresh := 0 // cands[:fresh] were not tried
	for _, in := range s.List() {
		if usable != nil && !usable(in) {
			continue
		}
		cands = append(cands, in)
		if !wasTried(tried, in) {
			last := len(cands) - 1
			cands[fresh], cands[last] = cands[last], cands[fresh]
			fresh++
		}
	}
	if fresh > 0 {
		cands = cands[:fresh]
	}
	var in *Instance
	switch n := len(cands); n {
	case 0:
		return nil
	case 1:
		in = cands[0]
	default:
		i, j := s.intN(n), s.intN(n-1)
		if j >= i {
			j++
		}
		in = cands[i]
		if other := cands[j]; other.outstanding.Load() < in.outstanding.Load() {
			in = other
		}
	}
	in.outstanding.Add(1)
	return in
}

func wasTried(tried []*Instance, in *Instance) bool {
	for _, t := range tried {
		if t == in {
			return true
		}
	}
	return false
}
