package http

// DeadlineSlack is deadlineSlack, for the tests of package http_test: a
// connection keeps a read deadline set less than read_timeout/DeadlineSlack
// ago, so a read on a reused connection can be cut that much early.
const DeadlineSlack = deadlineSlack
