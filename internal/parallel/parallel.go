// Package parallel runs the steps of a loop on a bounded number of
// goroutines: for configuring many network interfaces, where each step is
// a netlink round trip and a few in flight overlap one's system calls
// with another's kernel work.
package parallel

import "sync"

// For runs f(0) to f(n-1), each once, on up to p goroutines, and returns
// when all have returned. f must be safe to run concurrently with itself.
func For(n, p int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(p, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
