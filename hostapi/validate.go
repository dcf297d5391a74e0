package hostapi

// Validate runs the checks the server makes on a request body before it
// looks at any state (a zero flow or region, an unknown class or entropy,
// a zero length, critical and norms together, ...), for host-API
// implementations that take requests without the wire: req is a pointer
// to a request type (*FlowSpec, *SendReq, *RecvReq, *StepReq, ...). Other
// values pass.
func Validate(req any) error {
	if v, ok := req.(validator); ok {
		return v.validate()
	}
	return nil
}
