"""Job-title normalisation (seed 001): the test and training sets built from the taxonomy's
titles (`sets`), the n-gram baseline (`ngram`), the Siamese encoder's training (`training`),
and the stage that trains, evaluates, registers and applies it (`stage`)."""
