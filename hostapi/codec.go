package hostapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// requestBodies maps each request op to a constructor of its body type.
var requestBodies = map[Op]func() validator{
	OpHello:            func() validator { return new(HelloReq) },
	OpRegisterMemory:   func() validator { return new(RegisterReq) },
	OpDeregisterMemory: func() validator { return new(DeregisterReq) },
	OpCreateFlow:       func() validator { return new(FlowSpec) },
	OpDestroyFlow:      func() validator { return new(DestroyFlowReq) },
	OpPostSend:         func() validator { return new(SendReq) },
	OpPostRecv:         func() validator { return new(RecvReq) },
	OpBeginStep:        func() validator { return new(StepReq) },
	OpEndStep:          func() validator { return new(EndStepReq) },
	OpCounters:         func() validator { return new(emptyReq) },
	OpSteps:            func() validator { return new(StepsReq) },
	OpStatus:           func() validator { return new(emptyReq) },
}

// request is a decoded, validated request.
type request struct {
	id   uint64
	op   Op
	body validator
}

// decodeRequest decodes one request frame. A framing error (ErrFraming)
// means the connection must close; any other error is an *Error to send
// back, with the request id when the header carried one.
func decodeRequest(frame []byte) (request, error) {
	h, body, err := parseFrame(frame)
	if err != nil {
		return request{}, err
	}
	req := request{id: h.id, op: h.op}
	if err := checkRequestHeader(h); err != nil {
		return req, err
	}
	newBody, ok := requestBodies[h.op]
	if !ok {
		return req, errorf(CodeUnknownOp, "op 0x%02x is not a request", uint8(h.op))
	}
	v := newBody()
	if err := decodeStrict(body, v); err != nil {
		return req, errorf(CodeBadRequest, "%v body: %v", h.op, err)
	}
	if err := v.validate(); err != nil {
		return req, err
	}
	req.body = v
	return req, nil
}

func checkRequestHeader(h header) error {
	switch {
	case h.version != Version:
		return errorf(CodeUnsupportedVersion, "frame version %d, daemon speaks %d", h.version, Version)
	case h.flags != 0:
		return errorf(CodeBadRequest, "request flags 0x%02x, want 0", h.flags)
	case h.reserved != 0:
		return errorf(CodeBadRequest, "reserved header bytes 0x%04x, want 0", h.reserved)
	case h.id == 0:
		return errorf(CodeBadRequest, "request id 0 is reserved for daemon pushes")
	}
	return nil
}

// decodeStrict decodes one JSON value into v: unknown fields and trailing
// data are errors. An empty body reads as {}.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// encodeBody marshals a message body; nil encodes as an empty body.
func encodeBody(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// writeMessage writes one message as frames, each one Write (one
// SOCK_SEQPACKET message). A body longer than MaxBody is split across
// frames, all but the last flagged FlagMore. scratch is reused between
// calls by the one goroutine that owns it.
func writeMessage(w io.Writer, scratch *[]byte, op Op, flags uint8, id uint64, body []byte) error {
	for first := true; first || len(body) > 0; first = false {
		chunk := body[:min(len(body), MaxBody)]
		body = body[len(chunk):]
		f := flags
		if len(body) > 0 {
			f |= FlagMore
		}
		*scratch = appendFrame((*scratch)[:0], op, f, id, chunk)
		if _, err := w.Write(*scratch); err != nil {
			return err
		}
	}
	return nil
}
