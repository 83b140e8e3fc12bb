// Package readmodel is what the agent, the principal and the command line
// are shown of a transaction's record, read from the database.
//
// It holds the list of transactions, paged and filtered in SQL
// ([ListTransactions], list_transactions and the pages; [Transactions]);
// the views of disputes, determinations and exceptions ([ReadDisputes]),
// which get_transaction_record, the admin pages' timeline and `party
// disputes` show the same; and one transaction's view ([Transaction]:
// its events and how their chain holds, objects, obligations, forks,
// waiting messages, termination proposals, disputes, ledger and notice),
// which get_transaction_record returns and the admin pages render; and
// an agent's inbox ([Inbox], list_inbox): the counterparties' offers it
// can still accept.
//
// The list and the disputes read the database alone: the command line
// shows them without a running engine. A transaction's view needs a few
// answers only the running engine has, and asks them through [Derived]:
// its parse cache (the view shares the objects it parsed), the keys it
// resolves to organisations, what a waiting message carries, the peers it
// found away, obligations' due timing at its clock, the termination
// proposals and the ledger with its own pending instructions, which
// follow its rules. The inbox likewise asks [Offers] which offer of a
// transaction is its latest or its open amendment, and the act documents
// accepting one would be evaluated as under the caller's mandate.
// Package record implements Derived and Offers, so this package
// never imports record: record imports it, and hands every view over to
// it (record's Engine.Transaction is a call of [Transaction]).
package readmodel
