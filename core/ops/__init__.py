"""Operations every process shares: the broker's queues and the logs with their request ids."""
