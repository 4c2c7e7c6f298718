// Package objstoretest is the acceptance suite that every objstore.Store
// backend must pass: the contract of objstore.Store as executable tests.
//
// A backend's test calls Run with a constructor that returns a fresh, empty
// store for each subtest (a new directory, bucket or key prefix):
//
//	func TestMemStore(t *testing.T) {
//		objstoretest.Run(t, func(t *testing.T) objstore.Store {
//			s, err := objstore.Open(t.Context(), "mem://")
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite closes no store it did not open: the constructor registers the
// cleanup. Subtests do not call t.Parallel, so a constructor may use
// t.Setenv.
package objstoretest
