// Sample documents for task-mongo.yaml (mongosh, connected to the shop database). Run once by mongo-seed.
if (db.orders.estimatedDocumentCount() === 0) {
  db.orders.insertMany([
    {customer: "ada", total: NumberDecimal("12.5000"), placed: new Date("2024-01-02T03:04:05.678Z"),
     items: [{sku: "A-1", qty: NumberInt(2)}]},
    {customer: "grace", total: NumberDecimal("0.0100"), placed: new Date("2024-02-29T00:00:00Z"), items: []},
  ]);
}
if (db.events.estimatedDocumentCount() === 0) {
  db.events.insertMany([{kind: "signup", at: new Date(), who: "ada"}, {kind: "login", n: NumberLong(7)}]);
}
