package service

import (
	"maps"
	"slices"
	"sync"
)

// Seed is the stock a new inventory starts with: the SKUs of examples/orders'
// catalogue.
func Seed() map[string]int64 { return map[string]int64{"sku-42": 7, "sku-7": 120} }

// Store is the stock: how many items of each SKU are available. It is safe
// for concurrent use.
type Store struct {
	mu    sync.Mutex
	stock map[string]int64
}

// NewStore returns a store holding seed (copied).
func NewStore(seed map[string]int64) *Store {
	stock := make(map[string]int64, len(seed))
	maps.Copy(stock, seed)
	return &Store{stock: stock}
}

// Set makes n items of sku available, adding the SKU if it is new.
func (s *Store) Set(sku string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stock[sku] = n
}

// Available returns how many items of sku are available and whether the
// SKU exists.
func (s *Store) Available(sku string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.stock[sku]
	return n, ok
}

// take removes n items of sku when that many are available and returns what
// is left. known is false for no such SKU; enough is false, and nothing is
// taken, when fewer than n are available.
func (s *Store) take(sku string, n int64) (left int64, known, enough bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	have, ok := s.stock[sku]
	if !ok {
		return 0, false, false
	}
	if have < n {
		return have, true, false
	}
	s.stock[sku] = have - n
	return have - n, true, true
}

// items returns every SKU and its stock, in SKU order.
func (s *Store) items() []item {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]item, 0, len(s.stock))
	for _, sku := range slices.Sorted(maps.Keys(s.stock)) {
		out = append(out, item{sku, s.stock[sku]})
	}
	return out
}

type item struct {
	sku       string
	available int64
}
