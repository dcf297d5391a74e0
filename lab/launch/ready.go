package launch

import (
	"context"
	"fmt"
	"net/http"

	"github.com/forgive-emu/forgive/hostapi"
)

// readyClient asks without keep-alive: a readiness poll must not hold a
// connection to a process that is about to be measured.
var readyClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// HTTPReady is a readiness check that passes once url answers 200 OK, as
// trimswitch's /ready does once every port is bound.
func HTTPReady(url string) func(context.Context) error {
	return HTTPReadyVia(readyClient, url)
}

// HTTPReadyVia is HTTPReady through a given client, such as one that
// dials inside the process's network namespace.
func HTTPReadyVia(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}

// HostAPIReady is a readiness check that passes once a forgived answers a
// host-API hello on socket.
func HostAPIReady(socket string) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := hostapi.DialContext(ctx, socket)
		if err != nil {
			return err
		}
		return c.Close()
	}
}
