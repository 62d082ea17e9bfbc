// Package jfasttest is the test kit jfast's own tests use, for service authors too:
// an App built from a TOML string and started on a free loopback port, stopped by
// t.Cleanup, with its logs captured.
//
//	func TestHello(t *testing.T) {
//		svc := jfasttest.Start(t, jfasttest.Options{
//			TOML:   `[app]` + "\n" + `name = "hello"`,
//			Routes: routes,
//		})
//		resp := svc.Get(t, "/hello?name=ada")
//		if resp.Status != 200 {
//			t.Fatalf("status %d: %s", resp.Status, resp.Body)
//		}
//	}
package jfasttest
