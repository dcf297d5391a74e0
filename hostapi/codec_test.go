package hostapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// TestFrameLayout pins the header layout documented in docs/hostapi.md:
// magic "FGV", version, op, flags, two reserved bytes, a big-endian
// request id, then the JSON body.
func TestFrameLayout(t *testing.T) {
	body := []byte(`{"flow":1,"region":2,"offset":0,"length":3,"wr_id":4}`)
	got := appendFrame(nil, OpPostSend, 0, 0x0102030405060708, body)
	want := append([]byte{'F', 'G', 'V', 1, 0x06, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}, body...)
	if !bytes.Equal(got, want) {
		t.Fatalf("frame\n% x\nwant\n% x", got, want)
	}
	req, err := decodeRequest(got)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&SendReq{Flow: 1, Region: 2, Length: 3, WRID: 4}); req.id != 0x0102030405060708 || !reflect.DeepEqual(req.body, want) {
		t.Errorf("decoded id %#x body %+v, want %+v", req.id, req.body, want)
	}
}

// TestDecodeIsStrict: unknown fields, trailing data and invalid values are
// refused with a bad_request naming the problem, never ignored.
func TestDecodeIsStrict(t *testing.T) {
	for _, tc := range []struct {
		op   Op
		body string
		want string // substring of the message
	}{
		{OpPostSend, `{"flow":1,"region":1,"length":1,"priority":7}`, `unknown field "priority"`},
		{OpEndStep, `{"step":1}{}`, "trailing data"},
		{OpCreateFlow, `{"flow":1,"class":"bulk"}`, `unknown class "bulk"`},
		{OpBeginStep, `{"step":4,"lr_decay":true}`, "lr_decay goes with norms"},
		{OpPostRecv, `{"flow":1,"region":1,"length":1,"phase":"scatter"}`, `unknown phase "scatter"`},
		{OpPostRecv, `{"flow":1,"region":1,"length":1,"phase":"gather"}`, "phase gather without a step"},
		{OpPostRecv, `{"flow":1,"region":1,"offset":-5,"length":1}`, "cannot unmarshal number -5"},
	} {
		_, err := decodeRequest(appendFrame(nil, tc.op, 0, 9, []byte(tc.body)))
		var e *Error
		if !errors.As(err, &e) || e.Code != CodeBadRequest || !bytes.Contains([]byte(e.Message), []byte(tc.want)) {
			t.Errorf("%v %s: err = %v, want bad_request mentioning %q", tc.op, tc.body, err, tc.want)
		}
	}
}

// validRequest draws a request every decoder must accept.
func validRequest(t *rapid.T) (Op, validator) {
	flow := func(label string) FlowID { return FlowID(rapid.Uint32Min(1).Draw(t, label)) }
	region := func(label string) RegionID { return RegionID(rapid.Uint64Min(1).Draw(t, label)) }
	switch op := rapid.SampledFrom([]Op{OpHello, OpRegisterMemory, OpDeregisterMemory, OpCreateFlow, OpDestroyFlow,
		OpPostSend, OpPostRecv, OpBeginStep, OpEndStep, OpCounters, OpSteps, OpStatus}).Draw(t, "op"); op {
	case OpHello:
		return op, &HelloReq{Versions: rapid.SliceOfN(rapid.IntRange(0, 255), 1, 16).Draw(t, "versions"),
			Name: rapid.StringMatching(`[a-z0-9\-\[\]]{0,64}`).Draw(t, "name")}
	case OpRegisterMemory:
		return op, &RegisterReq{Length: rapid.Uint64Min(1).Draw(t, "length")}
	case OpDeregisterMemory:
		return op, &DeregisterReq{Region: region("region")}
	case OpCreateFlow:
		spec := &FlowSpec{Flow: flow("flow"), Peer: HostID(rapid.Uint16().Draw(t, "peer")),
			Class:   Class(rapid.IntRange(int(ClassGradient), int(ClassOther)).Draw(t, "class")),
			Entropy: Entropy(rapid.IntRange(int(EntropySingle), int(EntropyMessage)).Draw(t, "entropy"))}
		if spec.Entropy == EntropySubflows {
			spec.Subflows = rapid.Uint8Min(2).Draw(t, "subflows")
		}
		return op, spec
	case OpDestroyFlow:
		return op, &DestroyFlowReq{Flow: flow("flow")}
	case OpPostSend:
		return op, &SendReq{Flow: flow("flow"), Region: region("region"), Offset: rapid.Uint64().Draw(t, "offset"),
			Length: rapid.Uint64Min(1).Draw(t, "length"), WRID: rapid.Uint64().Draw(t, "wr_id")}
	case OpPostRecv:
		return op, &RecvReq{Flow: flow("flow"), Region: region("region"), Offset: rapid.Uint64().Draw(t, "offset"),
			Length: rapid.Uint64Min(1).Draw(t, "length"), Step: rapid.Uint64().Draw(t, "step"), WRID: rapid.Uint64().Draw(t, "wr_id")}
	case OpBeginStep:
		req := &StepReq{Step: rapid.Uint64().Draw(t, "step"), ExpectedGradientBytes: rapid.Uint64().Draw(t, "expected")}
		if rapid.Bool().Draw(t, "explicit") {
			req.Critical = new(rapid.Bool().Draw(t, "critical"))
		} else {
			req.Norms = rapid.SliceOfN(rapid.Float64Range(0, 1e12), 1, 64).Draw(t, "norms")
			req.LRDecay = rapid.Bool().Draw(t, "lr_decay")
		}
		return op, req
	case OpEndStep:
		return op, &EndStepReq{Step: rapid.Uint64().Draw(t, "step")}
	case OpSteps:
		return op, &StepsReq{Limit: rapid.IntRange(0, MaxStepRecords).Draw(t, "limit")}
	default:
		return op, &emptyReq{}
	}
}

// TestRequestsRoundTrip: every valid request the client can encode, the
// server decodes to the same value.
func TestRequestsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		op, want := validRequest(t)
		id := rapid.Uint64Min(1).Draw(t, "id")
		body, err := encodeBody(want)
		if err != nil {
			t.Fatalf("encode %v: %v", op, err)
		}
		req, err := decodeRequest(appendFrame(nil, op, 0, id, body))
		if err != nil {
			t.Fatalf("decode %v %s: %v", op, body, err)
		}
		if req.op != op || req.id != id || !reflect.DeepEqual(req.body, want) {
			t.Fatalf("round trip of %v %+v gave %v %d %+v", op, want, req.op, req.id, req.body)
		}
	})
}

// FuzzDecodeRequest: arbitrary bytes never panic the decoder; its errors
// are either framing errors or *Error replies; and whatever it accepts
// re-encodes to a request that decodes to the same value.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []struct {
		op   Op
		body string
	}{
		{OpHello, `{"versions":[1],"name":"rank-0"}`},
		{OpRegisterMemory, `{"length":4096}`},
		{OpDeregisterMemory, `{"region":1}`},
		{OpCreateFlow, `{"flow":7,"peer":2,"class":"gradient","entropy":"subflows","subflows":4}`},
		{OpDestroyFlow, `{"flow":7}`},
		{OpPostSend, `{"flow":7,"region":1,"offset":64,"length":4096,"wr_id":9}`},
		{OpPostRecv, `{"flow":7,"region":1,"length":4096,"step":3,"wr_id":10}`},
		{OpBeginStep, `{"step":3,"norms":[1.5,2.25],"lr_decay":true,"expected_gradient_bytes":1048576}`},
		{OpBeginStep, `{"step":4,"critical":false,"expected_gradient_bytes":1048576}`},
		{OpEndStep, `{"step":3}`},
		{OpCounters, ``},
		{OpSteps, `{"limit":10}`},
		{OpStatus, `{}`},
	}
	for _, s := range seeds {
		f.Add(appendFrame(nil, s.op, 0, 1, []byte(s.body)))
	}
	f.Add([]byte{})
	f.Add([]byte("FGV"))
	f.Add(appendFrame(nil, 0x7F, 0x03, 0, []byte("{")))

	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := decodeRequest(frame)
		if err != nil {
			var e *Error
			if !errors.Is(err, ErrFraming) && (!errors.As(err, &e) || e.Code == "") {
				t.Fatalf("error is neither a framing error nor a coded reply: %v", err)
			}
			return
		}
		body, err := json.Marshal(req.body)
		if err != nil {
			t.Fatalf("accepted %v body does not re-encode: %v", req.op, err)
		}
		if len(body) > MaxBody {
			return // canonical form longer than the input's; nothing to compare
		}
		again, err := decodeRequest(appendFrame(nil, req.op, 0, req.id, body))
		if err != nil {
			t.Fatalf("re-encoded %v %s does not decode: %v", req.op, body, err)
		}
		body2, _ := json.Marshal(again.body)
		if again.op != req.op || again.id != req.id || !bytes.Equal(body, body2) {
			t.Fatalf("round trip changed the request: %s -> %s", body, body2)
		}
	})
}
