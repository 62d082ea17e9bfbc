module orders

go 1.26.0

require github.com/jfastframework/jfast v0.0.0-00010101000000-000000000000

// The framework's own requirements, at its versions.
require (
	...the framework's requirements...
)

// jfast is not published yet: build against the checkout `jfast new` came from.
replace github.com/jfastframework/jfast => $FRAMEWORK
