"""RocketMQ's common module: the message record codec (encode and decode of stored records, message ids,
the properties text), shared by the store, the broker and the clients. Nothing here opens a store; importing
it loads no store engine module."""
