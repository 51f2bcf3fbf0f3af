# t_kafka_txn_diff.sh with Kafka and kpfs at transaction.version 0: the classic protocol
# (AddPartitionsToTxn and AddOffsetsToTxn from the producer, the epoch kept between
# transactions), which clients still speak against clusters finalized below 2.
TXN_DIFF_LEVEL=0
source "$(dirname "$0")/t_kafka_txn_diff.sh"
