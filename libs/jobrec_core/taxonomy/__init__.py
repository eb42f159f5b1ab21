"""The O*NET taxonomy: occupations and their titles (`onet`), and which titles the data
generator and the title normaliser may each use (`titles`)."""
