module github.com/jfastframework/jfast/bench

go 1.26.0

require (
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/jfastframework/jfast v0.0.0
	github.com/sony/gobreaker/v2 v2.4.0
)

require github.com/bits-and-blooms/bitset v1.24.4 // indirect

replace github.com/jfastframework/jfast => ../
