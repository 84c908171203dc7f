package main

// What `go run ./examples/quickstart` prints, pinned so that the program
// stays what the README says it is.
func Example() {
	main()
	// Output:
	// step 1: look up the user
	// step 2: load the profile of alice
	//   handled NotImplemented (profile store is offline): using a default profile
	// step 3: got default profile - fetching two things at once
	//   fetched: 3 orders and 3 messages
	// step 4: iteration 0
	// step 4: iteration 1
	// step 4: iteration 2
	// done
}
